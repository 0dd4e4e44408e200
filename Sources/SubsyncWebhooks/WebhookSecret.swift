import Crypto
import Foundation

/// An endpoint's signing secret, `whsec_<base64 key bytes>` as subsync shows it.
///
/// The key never appears in ``description``, ``debugDescription`` or a mirror (`dump`), so a
/// secret can be logged by mistake without leaking.
public struct WebhookSecret: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Why a secret string was refused.
    public enum ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        /// The string does not start with `whsec_`.
        case missingPrefix
        /// The part after `whsec_` is not base64.
        case invalidBase64
        /// The key is empty.
        case emptyKey
        /// ``WebhookVerifier`` was given no secret at all.
        case noSecrets

        /// A message for logs (it never contains the secret).
        public var description: String {
            switch self {
            case .missingPrefix: "Webhook secret refused: it must start with 'whsec_'."
            case .invalidBase64: "Webhook secret refused: the part after 'whsec_' is not valid base64."
            case .emptyKey: "Webhook secret refused: the key is empty."
            case .noSecrets: "Webhook verifier refused: no secret was given."
            }
        }
    }

    /// The prefix of a secret string.
    public static let prefix = "whsec_"

    /// The HMAC key: the base64-decoded part after `whsec_`.
    let key: SymmetricKey

    /// Parses `text`, `whsec_` followed by the base64 key (surrounding white space, such as a
    /// trailing newline of a file or environment variable, is ignored; missing `=` padding is
    /// tolerated).
    public init(_ text: String) throws(ParseError) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.hasPrefix(Self.prefix) else { throw ParseError.missingPrefix }
        var encoded = String(trimmed.dropFirst(Self.prefix.count))
        guard !encoded.isEmpty else { throw ParseError.emptyKey }
        let remainder = encoded.utf8.count % 4
        if remainder != 0 {
            encoded += String(repeating: "=", count: 4 - remainder)
        }
        guard let bytes = Data(base64Encoded: encoded) else { throw ParseError.invalidBase64 }
        guard !bytes.isEmpty else { throw ParseError.emptyKey }
        self.key = SymmetricKey(data: bytes)
    }

    /// `whsec_…(redacted)`: never the key.
    public var description: String { "\(Self.prefix)…(redacted)" }

    /// `whsec_…(redacted)`: never the key.
    public var debugDescription: String { description }

    /// A mirror without children, so `dump` shows no key.
    public var customMirror: Mirror {
        Mirror(self, children: [Mirror.Child](), displayStyle: .struct)
    }
}
