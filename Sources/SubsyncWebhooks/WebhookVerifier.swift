import Crypto
import Foundation

/// Verifies subsync's webhook deliveries (the Standard Webhooks scheme) and decodes them.
///
/// A delivery carries three headers: `webhook-id` (the event id, stable across retries),
/// `webhook-timestamp` (Unix seconds of this attempt) and `webhook-signature`, a space-separated
/// list of `v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>` entries (two during a
/// secret rotation). A delivery is accepted when its timestamp is within the tolerance of now and
/// one `v1` entry matches one configured secret.
///
/// ```swift
/// let verifier = try WebhookVerifier(secrets: [secretFromEnvironment])
/// let delivery = try verifier.verify(body: requestBody, headers: requestHeaders)
/// ```
///
/// Pass the body exactly as received (the signature covers its bytes). A verifier is a value:
/// share it freely between tasks.
public struct WebhookVerifier: Sendable {
    /// The secrets accepted (the old and the new one during a rotation).
    private let secrets: [WebhookSecret]
    /// How far, in seconds, a delivery's timestamp may be from now, either way.
    public let tolerance: TimeInterval

    /// A verifier accepting signatures made with any of `secrets` (`whsec_...` strings), with
    /// timestamps at most `tolerance` seconds from now.
    ///
    /// - Throws: ``WebhookSecret/ParseError`` when a secret is malformed, or
    ///   ``WebhookSecret/ParseError/noSecrets`` when `secrets` is empty.
    public init(secrets: [String], tolerance: TimeInterval = 300) throws {
        guard !secrets.isEmpty else { throw WebhookSecret.ParseError.noSecrets }
        var parsed: [WebhookSecret] = []
        parsed.reserveCapacity(secrets.count)
        for text in secrets {
            parsed.append(try WebhookSecret(text))
        }
        self.secrets = parsed
        self.tolerance = tolerance
    }

    /// Checks the headers and signature of a delivery, then decodes its body.
    ///
    /// Header names are matched case-insensitively. The checks, in order: the three headers are
    /// present, the timestamp is whole Unix seconds, it is within ``tolerance`` of `now`, one
    /// `v1` signature matches one secret (compared in constant time; entries of other versions
    /// are ignored), and the body decodes.
    ///
    /// - Returns: the delivery, with ``WebhookDelivery/id`` the `webhook-id`.
    public func verify(
        body: Data, headers: [String: String], now: Date = Date()
    ) throws(WebhookVerificationError) -> WebhookDelivery {
        guard let id = Self.header("webhook-id", in: headers) else {
            throw WebhookVerificationError.missingHeader("webhook-id")
        }
        guard let timestampText = Self.header("webhook-timestamp", in: headers) else {
            throw WebhookVerificationError.missingHeader("webhook-timestamp")
        }
        guard let signatureText = Self.header("webhook-signature", in: headers) else {
            throw WebhookVerificationError.missingHeader("webhook-signature")
        }

        guard timestampText.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let timestamp = Int64(timestampText)
        else {
            throw WebhookVerificationError.invalidTimestamp
        }
        let age = now.timeIntervalSince1970 - Double(timestamp)
        guard abs(age) <= tolerance else {
            // Clamped so that absurd timestamps cannot overflow `Int`.
            let clamped = min(max(age, -1e15), 1e15)
            throw WebhookVerificationError.timestampOutOfTolerance(seconds: Int(clamped.rounded()))
        }

        let message = Self.signedContent(id: id, timestamp: timestampText, body: body)
        let expected = secrets.map { secret in
            Array(HMAC<SHA256>.authenticationCode(for: message, using: secret.key))
        }
        var matched = false
        for candidate in Self.v1Signatures(in: signatureText) {
            for mac in expected where Self.constantTimeEqual(candidate, mac) {
                matched = true
            }
        }
        guard matched else { throw WebhookVerificationError.noMatchingSignature }

        var delivery: WebhookDelivery
        do {
            delivery = try JSONDecoder().decode(WebhookDelivery.self, from: body)
        } catch {
            throw WebhookVerificationError.malformedBody(Self.describe(error))
        }
        delivery.id = id
        return delivery
    }

    /// The `webhook-signature` entry subsync would send for this message and secret:
    /// `v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`. Join several with a space for
    /// a rotation. For tests and tools.
    public static func signature(id: String, timestamp: Int64, body: Data, secret: WebhookSecret) -> String {
        let message = signedContent(id: id, timestamp: String(timestamp), body: body)
        let code = HMAC<SHA256>.authenticationCode(for: message, using: secret.key)
        return "v1," + Data(code).base64EncodedString()
    }

    // MARK: - Internals

    /// `<id>.<timestamp>.<body>` as bytes.
    static func signedContent(id: String, timestamp: String, body: Data) -> [UInt8] {
        var message: [UInt8] = []
        message.reserveCapacity(id.utf8.count + timestamp.utf8.count + body.count + 2)
        message.append(contentsOf: id.utf8)
        message.append(UInt8(ascii: "."))
        message.append(contentsOf: timestamp.utf8)
        message.append(UInt8(ascii: "."))
        message.append(contentsOf: body)
        return message
    }

    /// The value of header `name` (lowercase), matched case-insensitively and trimmed; `nil`
    /// when absent or empty.
    static func header(_ name: String, in headers: [String: String]) -> String? {
        for (key, value) in headers where key.lowercased() == name {
            let trimmed = value.trimmingCharacters(in: .whitespacesAndNewlines)
            if !trimmed.isEmpty { return trimmed }
        }
        return nil
    }

    /// The decoded bytes of each `v1,<base64>` entry of a signature header; entries of other
    /// versions, and undecodable ones, are skipped.
    static func v1Signatures(in header: String) -> [[UInt8]] {
        var result: [[UInt8]] = []
        for entry in header.split(separator: " ", omittingEmptySubsequences: true) {
            guard let comma = entry.firstIndex(of: ",") else { continue }
            guard entry[..<comma] == "v1" else { continue }
            let encoded = String(entry[entry.index(after: comma)...])
            guard let bytes = Data(base64Encoded: encoded) else { continue }
            result.append(Array(bytes))
        }
        return result
    }

    /// Whether `a` and `b` are equal, in time that depends only on their lengths.
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices {
            difference |= a[index] ^ b[index]
        }
        return difference == 0
    }

    /// A short account of a decoding failure (the coding path and what was wrong).
    static func describe(_ error: any Error) -> String {
        guard let decodingError = error as? DecodingError else {
            return String(describing: error)
        }
        func path(_ context: DecodingError.Context) -> String {
            let text = context.codingPath.map { key in
                key.intValue.map { "[\($0)]" } ?? key.stringValue
            }.joined(separator: ".")
            return text.isEmpty ? "the body" : "'\(text)'"
        }
        switch decodingError {
        case .keyNotFound(let key, let context):
            let parent = context.codingPath.isEmpty ? "" : " in \(path(context))"
            return "missing key '\(key.stringValue)'\(parent)"
        case .valueNotFound(_, let context):
            return "unexpected null at \(path(context))"
        case .typeMismatch(_, let context):
            return "wrong type at \(path(context)): \(context.debugDescription)"
        case .dataCorrupted(let context):
            return "invalid value at \(path(context)): \(context.debugDescription)"
        @unknown default:
            return String(describing: decodingError)
        }
    }
}
