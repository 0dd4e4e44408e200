import Crypto
import Foundation

/// Short-lived tokens that bind a rewarded ad to the account that asked for it (docs/SECURITY.md,
/// *Purchases and the stores*). AdMob's callback names the account in `user_id`, which the app
/// sets, so a modified app could credit any account or spend a victim's daily cap. With tokens,
/// the app first asks `POST /v1/accounts/{id}/rewards/token` (with the account's device token),
/// passes the answer as `custom_data` in `ServerSideVerificationOptions`, which AdMob signs with
/// the callback, and the callback is taken only for the account the token names, once per token.
///
/// A token is `rw1.<payload>.<mac>` (web-safe base64): the payload is the account id, the
/// expiry in milliseconds and a random nonce; the MAC is HMAC-SHA256 under a key derived from
/// `SUBSYNC_TOKEN_SECRET`, so every process checks every other's tokens without a database.
/// One token is good for one reward (its nonce names the ledger entry).
public struct RewardTokens: Sendable {
    let key: SymmetricKey
    /// Keys of former token secrets (`SUBSYNC_TOKEN_SECRET_PREVIOUS`), whose tokens still count
    /// while a rotation runs.
    let previousKeys: [SymmetricKey]
    /// How long a token stays good: the time from fetching it to AdMob's callback (the ad is
    /// loaded, watched, then AdMob calls back, retrying for a while).
    public static let lifetime: TimeInterval = 24 * 3600
    static let prefix = "rw1."

    /// Tokens under `tokenSecret` (`SUBSYNC_TOKEN_SECRET`), through a key of their own; those of
    /// `previousSecrets` are still accepted.
    public init(tokenSecret: String, previousSecrets: [String] = []) {
        key = Self.derive(tokenSecret)
        previousKeys = previousSecrets.filter { $0 != tokenSecret }.map(Self.derive)
    }

    private static func derive(_ secret: String) -> SymmetricKey {
        SymmetricKey(data: Data(HMAC<SHA256>.authenticationCode(for: Data("subsync.reward-token.v1".utf8), using: SymmetricKey(data: Data(secret.utf8)))))
    }

    /// What a token says.
    public struct Claims: Sendable, Equatable {
        public var accountID: String
        public var expiresAt: Date
        /// Names the one reward the token is good for.
        public var nonce: String
    }

    /// A new token for `accountID`, good until `now` + ``lifetime``.
    public func issue(accountID: String, now: Date) -> (token: String, expiresAt: Date) {
        var generator = SystemRandomNumberGenerator()
        let nonce = Self.webSafe(Data((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }))
        let expiresAt = now.addingTimeInterval(Self.lifetime)
        let payload = Data("\(accountID)\n\(Int64((expiresAt.timeIntervalSince1970 * 1000).rounded()))\n\(nonce)".utf8)
        let mac = HMAC<SHA256>.authenticationCode(for: payload, using: key)
        return (Self.prefix + Self.webSafe(payload) + "." + Self.webSafe(Data(mac)), Date(timeIntervalSince1970: (expiresAt.timeIntervalSince1970 * 1000).rounded() / 1000))
    }

    /// The claims of `text` when it is a token this key made (the MAC compared in constant
    /// time); `nil` for anything else. Expiry is the caller's to judge.
    public func verify(_ text: String) -> Claims? {
        guard text.hasPrefix(Self.prefix), text.utf8.count <= 1024 else { return nil }
        let parts = text.dropFirst(Self.prefix.count).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let payload = Self.data(parts[0]), let mac = Self.data(parts[1]),
            ([key] + previousKeys).contains(where: { HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: payload, using: $0) })
        else { return nil }
        let fields = String(decoding: payload, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        guard fields.count == 3, let milliseconds = Int64(fields[1]), !fields[0].isEmpty, !fields[2].isEmpty else { return nil }
        return Claims(accountID: String(fields[0]), expiresAt: Date(timeIntervalSince1970: Double(milliseconds) / 1000), nonce: String(fields[2]))
    }

    static func webSafe(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func data(_ text: Substring) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }
}
