import Crypto
import Foundation

/// The `appAccountToken` each account may put on its purchases, and the proof that a token
/// seen on a purchase belongs to the account reporting it.
///
/// StoreKit lets an app set any UUID as a purchase's `appAccountToken`, and a tampered client can
/// set someone else's. So a token binds to an account (and routes the store's notifications
/// there) only when it is *that account's*:
/// - the derived token: `HMAC-SHA256(SUBSYNC_APP_ACCOUNT_TOKEN_KEY, "subsync.app-account-token.v1\0" + account id)`,
///   its first 16 bytes as a UUID (version 8, RFC 9562 variant): stable, and not guessable
///   without the key. The account state carries it as `app_account_token` for the app to pass to
///   `Product.purchase(options: [.appAccountToken(...)])`;
/// - the legacy form: the account id itself, when it is a UUID (apps that use their account UUID).
///
/// Any other token is *unproven*: the purchase is still stored and bound by its original
/// transaction id, but the token neither binds nor routes, and never causes a conflict.
/// The key must never change: purchases keep their token for life.
public struct AppAccountTokens: Sendable {
    private let key: SymmetricKey?

    /// - Parameter key: `SUBSYNC_APP_ACCOUNT_TOKEN_KEY`; `nil` accepts only the legacy form.
    public init(key: String?) {
        self.key = key.map { SymmetricKey(data: Data($0.utf8)) }
    }

    /// The token `accountID` should put on its purchases: the derived one with a key, else the
    /// account id when it is a UUID, else `nil`.
    public func token(for accountID: String) -> UUID? {
        derived(for: accountID) ?? UUID(uuidString: accountID)
    }

    /// Whether `token` belongs to `accountID` (derived, or the legacy account-UUID form).
    public func proves(_ token: UUID, for accountID: String) -> Bool {
        if let legacy = UUID(uuidString: accountID), legacy == token { return true }
        guard let derived = derived(for: accountID) else { return false }
        return ConstantTime.equals(derived.uuidString, token.uuidString)
    }

    private func derived(for accountID: String) -> UUID? {
        guard let key else { return nil }
        var message = Data("subsync.app-account-token.v1".utf8)
        message.append(0)
        message.append(contentsOf: accountID.utf8)
        var bytes = Array(HMAC<SHA256>.authenticationCode(for: message, using: key).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x80  // version 8: custom
        bytes[8] = (bytes[8] & 0x3F) | 0x80  // RFC 9562 variant
        return UUID(uuid: (
            bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
            bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
        ))
    }
}
