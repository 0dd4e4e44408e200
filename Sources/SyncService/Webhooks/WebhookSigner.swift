import Crypto
import Foundation
import Postgres
import SyncStore

/// Signs webhook requests as the Standard Webhooks specification says:
/// `webhook-signature: v1,<base64(HMAC-SHA256(key, "<id>.<timestamp>.<body>"))>`, one
/// space-separated entry per active secret (two during a rotation).
public enum WebhookSigner {
    /// A secret made ready to sign: the HMAC keyed with it, copied for each message, so the key
    /// is set up once per secret rather than once per attempt: the key's setup is half of what
    /// a signature costs (docs/PERFORMANCE.md, *In the code*).
    public struct Key: Sendable {
        let keyed: HMAC<SHA256>

        public init(_ secret: WebhookSecret) {
            keyed = HMAC<SHA256>(key: SymmetricKey(data: secret.key))
        }
    }

    /// The signature header's value for a message signed with each of `secrets`.
    public static func signature(id: String, timestamp: Int, body: [UInt8], secrets: [WebhookSecret]) -> String {
        signature(id: id, timestamp: timestamp, body: body, keys: secrets.map(Key.init))
    }

    /// The signature header's value for a message signed with each of `keys`.
    public static func signature(id: String, timestamp: Int, body: [UInt8], keys: [Key]) -> String {
        let prefix = Array("\(id).\(timestamp).".utf8)
        return keys.map { key in
            var mac = key.keyed
            mac.update(data: prefix)
            mac.update(data: body)
            return "v1," + Data(mac.finalize()).base64EncodedString()
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
