import Crypto
import Foundation
import Postgres
import SyncStore

/// Signs webhook requests as the Standard Webhooks specification says:
/// `webhook-signature: v1,<base64(HMAC-SHA256(key, "<id>.<timestamp>.<body>"))>`, one
/// space-separated entry per active secret (two during a rotation).
public enum WebhookSigner {
    /// The signature header's value for a message signed with each of `secrets`.
    public static func signature(id: String, timestamp: Int, body: [UInt8], secrets: [WebhookSecret]) -> String {
        var message = Array("\(id).\(timestamp).".utf8)
        message.append(contentsOf: body)
        return secrets.map { secret in
            let code = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: secret.key))
            return "v1," + Data(code).base64EncodedString()
        }.joined(separator: " ")
    }

    /// The body of a delivery: `{"type", "timestamp", "data"}` with the stored event as `data`.
    public static func body(type: String, occurredAt: Date, payload: String) -> [UInt8] {
        var text = #"{"type":"#
        text += jsonString(type)
        text += #","timestamp":"#
        text += jsonString(RFC3339.format(occurredAt))
        text += #","data":"#
        text += payload
        text += "}"
        return Array(text.utf8)
    }

    private static func jsonString(_ text: String) -> String {
        // Event types and timestamps are our own ASCII, but encode properly anyway.
        String(decoding: (try? JSONEncoder().encode(text)) ?? Data("\"\"".utf8), as: UTF8.self)
    }
}
