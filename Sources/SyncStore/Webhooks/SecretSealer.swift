import Crypto
import Foundation
import Postgres

/// Encrypts webhook signing secrets at rest (AES-256-GCM), so a copy of the database (a backup,
/// a replica, a dump in a ticket) does not let its holder sign webhooks as subsync.
///
/// A sealed secret is stored as `sealed:v1:<key id>:<base64 of nonce ‖ ciphertext ‖ tag>`, the
/// key id being a hash of the key that names it without revealing it. The first key seals; every
/// key opens, so keys rotate: add the new key first, run `subsync endpoints reseal`, then drop the
/// old one. A secret stored before sealing was configured (no prefix) is read as it is and sealed
/// by the next reseal or rotation. Without keys (``none``) secrets are stored in clear.
public struct SecretSealer: Sendable {
    /// Why a stored secret cannot be opened.
    public struct OpenError: Error, CustomStringConvertible {
        public var description: String
    }

    private static let prefix = "sealed:v1:"
    private static let context = Data("subsync.webhook-secret.v1".utf8)
    private let keys: [(id: String, key: SymmetricKey)]

    /// Secrets in clear (no key configured).
    public static let none = SecretSealer(validatedKeys: [])

    /// - Parameter keys: base64 of 32 random bytes each, current first (`SUBSYNC_SECRET_KEYS`).
    /// - Throws: ``OpenError`` naming the position of a key that is not 32 bytes of base64.
    public init(keys: [String]) throws {
        var parsed: [SymmetricKey] = []
        for (index, text) in keys.enumerated() {
            guard let data = Data(base64Encoded: text.trimmingCharacters(in: .whitespaces)), data.count == 32 else {
                throw OpenError(description: "key \(index + 1) is not 32 bytes of base64 (make one with: openssl rand -base64 32)")
            }
            parsed.append(SymmetricKey(data: data))
        }
        self.init(validatedKeys: parsed)
    }

    private init(validatedKeys: [SymmetricKey]) {
        keys = validatedKeys.map { (Self.keyID($0), $0) }
    }

    /// Whether secrets are sealed (a key is configured).
    public var isSealing: Bool { !keys.isEmpty }

    /// A new random key, as `SUBSYNC_SECRET_KEYS` takes it.
    public static func generateKey() -> String {
        SymmetricKey(size: .bits256).withUnsafeBytes { Data($0).base64EncodedString() }
    }

    /// What to store for `secret`: sealed with the current key, or the secret itself without keys.
    public func seal(_ secret: WebhookSecret) throws -> String {
        guard let current = keys.first else { return secret.text }
        let box = try AES.GCM.seal(Data(secret.text.utf8), using: current.key, authenticating: Self.context)
        guard let combined = box.combined else { throw OpenError(description: "AES-GCM produced no combined box") }
        return Self.prefix + current.id + ":" + combined.base64EncodedString()
    }

    /// The secret a stored value holds.
    /// - Throws: ``OpenError`` when it was sealed with a key that is not configured, or does not open.
    public func open(_ stored: String) throws -> WebhookSecret {
        guard stored.hasPrefix(Self.prefix) else { return WebhookSecret(text: stored) }
        let rest = stored.dropFirst(Self.prefix.count)
        guard let colon = rest.firstIndex(of: ":") else { throw OpenError(description: "a sealed secret is malformed") }
        let id = String(rest[..<colon])
        guard let key = keys.first(where: { $0.id == id })?.key else {
            throw OpenError(description: "a webhook secret is sealed with key \(id), which is not in SUBSYNC_SECRET_KEYS")
        }
        do {
            guard let combined = Data(base64Encoded: String(rest[rest.index(after: colon)...])) else {
                throw OpenError(description: "a sealed secret is malformed")
            }
            let plain = try AES.GCM.open(AES.GCM.SealedBox(combined: combined), using: key, authenticating: Self.context)
            return WebhookSecret(text: String(decoding: plain, as: UTF8.self))
        } catch let error as OpenError {
            throw error
        } catch {
            throw OpenError(description: "a webhook secret sealed with key \(id) does not open (tampered, or another key under that id)")
        }
    }

    /// Whether `stored` is sealed with the current key (nothing for a reseal to do).
    public func isCurrent(_ stored: String) -> Bool {
        guard let current = keys.first else { return !stored.hasPrefix(Self.prefix) }
        return stored.hasPrefix(Self.prefix + current.id + ":")
    }

    static func keyID(_ key: SymmetricKey) -> String {
        let digest = key.withUnsafeBytes { SHA256.hash(data: Data("subsync.secret-key-id\u{0}".utf8) + Data($0)) }
        return HexText.lowercase(digest.prefix(4))
    }
}
