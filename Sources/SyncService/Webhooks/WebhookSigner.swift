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
        var bytes: [UInt8] = []
        bytes.reserveCapacity(payload.utf8.count + 96)
        bytes.append(contentsOf: #"{"type":"#.utf8)
        PostgresJSONEncoder.appendString(type, to: &bytes)
        bytes.append(contentsOf: #","timestamp":""#.utf8)
        RFC3339.append(occurredAt, to: &bytes)
        bytes.append(contentsOf: #"","data":"#.utf8)
        bytes.append(contentsOf: payload.utf8)
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }
}
