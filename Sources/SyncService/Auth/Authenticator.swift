import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import JWTKit
import Postgres
import SyncCore

/// Who is calling.
public enum Principal: Sendable, Equatable {
    /// An operator or the app's backend, holding an admin key: any account. `name` is the key's
    /// (`SUBSYNC_ADMIN_KEYS`), or ``Authenticator/legacyAdminName`` for `SUBSYNC_ADMIN_KEY`.
    case admin(name: String)
    /// A device holding an account token: only that account.
    case device(accountID: String)

    /// Whether this principal may act on `accountID`.
    public func mayAccess(accountID: String) -> Bool {
        switch self {
        case .admin: true
        case .device(let own): own == accountID
        }
    }

    /// Whether this is an admin key's holder.
    public var isAdmin: Bool {
        if case .admin = self { return true }
        return false
    }
}

/// Checks `Authorization: Bearer ...`: an admin key (compared in constant time) or an HS256
/// account token signed with the token secret.
public struct Authenticator: Sendable {
    /// The admin keys by name: `SUBSYNC_ADMIN_KEYS`, and `SUBSYNC_ADMIN_KEY` as
    /// ``legacyAdminName``.
    let adminKeys: [(name: String, key: String)]
    /// The name of the one shared key, `SUBSYNC_ADMIN_KEY`.
    public static let legacyAdminName = "admin"
    let keys: JWTKeyCollection
    let tokensEnabled: Bool
    /// The `kid` of the current token secret: tokens are signed with it.
    let currentKeyID: JWKIdentifier?
    /// Token expiry is checked against this clock.
    let clock: any ServiceClock
    /// `SUBSYNC_TOKEN_MAX_LIFETIME`: the longest a device token may live (its `exp` after its
    /// `iat`, or after now without one), whatever its issuer set; `nil`: no bound.
    let maximumLifetime: TimeInterval?
    /// Per-account revocations (``TokenRevocations``); `nil` without a database (tests that
    /// only mint, `subsync tokens mint`). ``buildApplication`` sets it.
    var revocations: TokenRevocationCache?
    /// The default of ``maximumLifetime``: 30 days.
    public static let defaultMaximumLifetime: TimeInterval = 30 * 86_400

    /// - Parameters:
    ///   - adminKey: `SUBSYNC_ADMIN_KEY`, named ``legacyAdminName``; nil (and no `adminKeys`)
    ///     disables admin access.
    ///   - adminKeys: `SUBSYNC_ADMIN_KEYS`: each operator's (or backend's) key by name.
    ///   - tokenSecret: `SUBSYNC_TOKEN_SECRET`; nil disables device tokens.
    ///   - previousTokenSecrets: `SUBSYNC_TOKEN_SECRET_PREVIOUS`: secrets whose tokens are still
    ///     accepted (by their `kid`) while a rotation runs; new tokens are signed with `tokenSecret`.
    ///   - clock: the service's clock, for token expiry and `nbf`.
    ///   - maximumLifetime: the longest lifetime a token may have (``maximumLifetime``).
    public init(
        adminKey: String?, adminKeys: [String: String] = [:], tokenSecret: String?, previousTokenSecrets: [String] = [],
        clock: any ServiceClock = SystemClock(), maximumLifetime: TimeInterval? = Authenticator.defaultMaximumLifetime
    ) async {
        self.adminKeys = adminKeys.sorted { $0.key < $1.key }.map { (name: $0.key, key: $0.value) }
            + (adminKey.map { [(name: Self.legacyAdminName, key: $0)] } ?? [])
        self.clock = clock
        self.maximumLifetime = maximumLifetime
        self.keys = JWTKeyCollection()
        // The current secret is also the default key: tokens minted before key ids existed
        // (no `kid`) still verify with it.
        if let tokenSecret {
            await keys.add(hmac: HMACKey(from: tokenSecret), digestAlgorithm: .sha256, kid: Self.keyID(tokenSecret))
        }
        for previous in previousTokenSecrets where previous != tokenSecret {
            await keys.add(hmac: HMACKey(from: previous), digestAlgorithm: .sha256, kid: Self.keyID(previous))
        }
        self.currentKeyID = tokenSecret.map(Self.keyID)
        self.tokensEnabled = tokenSecret != nil
    }

    /// A token secret's key id: a hash of it, which names the secret without revealing it.
    public static func keyID(_ secret: String) -> JWKIdentifier {
        var message = Data("subsync.token-key-id\u{0}".utf8)
        message.append(contentsOf: secret.utf8)
        let digest = SHA256.hash(data: message)
        return JWKIdentifier(string: "k" + HexText.lowercase(digest.prefix(6)))
    }

    /// The credential of a `Bearer <credential>` header (the scheme in any case), without the
    /// whitespace around it; nil for another scheme or none. On bytes for an ASCII header (every
    /// real one): lower-casing the whole header and Foundation's `trimmingCharacters` cost every
    /// request (docs/PERFORMANCE.md, *In the code*); a header with
    /// other characters takes that path still, so what is trimmed does not change.
    static func bearerCredential(_ header: String) -> String? {
        let prefix = "Bearer "
        guard header.utf8.allSatisfy({ $0 < 0x80 }) else {
            guard header.count > prefix.count, header.lowercased().hasPrefix(prefix.lowercased()) else { return nil }
            return String(header.dropFirst(prefix.count)).trimmingCharacters(in: .whitespaces)
        }
        let bytes = Array(header.utf8)
        guard bytes.count > prefix.utf8.count,
            zip(bytes, prefix.utf8).allSatisfy({ Self.asciiLowercased($0) == Self.asciiLowercased($1) })
        else { return nil }
        func isSpace(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        var start = prefix.utf8.count
        var end = bytes.count
        while start < end, isSpace(bytes[start]) { start += 1 }
        while end > start, isSpace(bytes[end - 1]) { end -= 1 }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }

    private static func asciiLowercased(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 0x20 : byte
    }

    /// The caller of `request`.
    ///
    /// - Throws: ``APIError`` 401 with `unauthenticated` (no credentials), `invalid_token`,
    ///   `token_expired`, `token_not_yet_valid`, `token_lifetime_exceeded` (it lives longer than
    ///   `SUBSYNC_TOKEN_MAX_LIFETIME`) or `token_revoked` (issued before its account's tokens
    ///   were revoked). The token itself is never echoed.
    public func authenticate(_ request: Request) async throws -> Principal {
        guard let header = request.headers[.authorization] else {
            throw APIError(.unauthorized, code: "unauthenticated", message: "missing Authorization: Bearer <token> header",
                           headers: [.wwwAuthenticate: "Bearer"])
        }
        guard let credential = Self.bearerCredential(header) else {
            throw APIError(.unauthorized, code: "unauthenticated", message: "the Authorization header must be 'Bearer <token>'",
                           headers: [.wwwAuthenticate: "Bearer"])
        }
        // Every key is compared, in constant time each, whichever matches.
        var admin: String?
        for candidate in adminKeys where ConstantTime.equals(credential, candidate.key) { admin = candidate.name }
        if let admin { return .admin(name: admin) }
        guard tokensEnabled else {
            throw Self.invalidToken("invalid_token", "the credential is not valid")
        }
        let token: AccountToken
        do {
            token = try await keys.verify(credential, as: AccountToken.self)
        } catch {
            throw Self.invalidToken("invalid_token", "the credential is not valid")
        }
        let now = clock.now()
        guard !token.isExpired(at: now) else {
            throw Self.invalidToken("token_expired", "the account token has expired")
        }
        guard !token.isNotYetValid(at: now) else {
            throw Self.invalidToken("token_not_yet_valid", "the account token is not valid yet (nbf)")
        }
        if let issued = token.iat?.value, issued > now.addingTimeInterval(60) {
            throw Self.invalidToken("invalid_token", "the account token was issued in the future (iat)")
        }
        if let maximumLifetime {
            // One second of slack for issuers that round iat and exp differently. (Dates a token
            // carries can be any number: nothing here converts them to an integer.)
            let lifetime = token.exp.value.timeIntervalSince(token.iat?.value ?? now)
            guard lifetime.isFinite, lifetime <= maximumLifetime + 1 else {
                throw Self.invalidToken("token_lifetime_exceeded", "account tokens may live at most \(Int(maximumLifetime)) seconds on this server (SUBSYNC_TOKEN_MAX_LIFETIME); this one lives longer")
            }
        }
        let accountID = token.sub.value
        if let revocations, let line = try await revocations.revokedBefore(accountID) {
            // Without `iat` a token cannot show it came after the revocation.
            guard let issued = token.iat?.value, issued >= line else {
                throw Self.invalidToken("token_revoked", "the account's tokens issued before \(RFC3339.format(line)) were revoked; get a new one")
            }
        }
        return .device(accountID: accountID)
    }

    /// Authenticates and checks access to `accountID` (403 `forbidden` for another account).
    public func authorize(_ request: Request, accountID: String) async throws -> Principal {
        let principal = try await authenticate(request)
        guard principal.mayAccess(accountID: accountID) else {
            throw APIError(.forbidden, code: "forbidden", message: "this token may not act on that account")
        }
        return principal
    }

    /// Signs an account token (for `subsync tokens mint` and tests).
    public func mint(accountID: String, validFor: TimeInterval, now: Date? = nil) async throws -> String {
        let now = now ?? clock.now()
        return try await keys.sign(
            AccountToken(accountID: accountID, expiresAt: now.addingTimeInterval(validFor), issuedAt: now, notBefore: now), kid: currentKeyID)
    }
}

extension Authenticator {
    /// Whether any admin key is configured (the console and the admin routes exist).
    public var hasAdminKeys: Bool { !adminKeys.isEmpty }

    /// Whether any named admin key (`SUBSYNC_ADMIN_KEYS`) is configured.
    public var hasNamedAdminKeys: Bool { adminKeys.contains { $0.name != Self.legacyAdminName } }
}

extension Authenticator {
    /// The 401 of a credential that is not a valid account token (`code` says why), with the
    /// `WWW-Authenticate` challenge RFC 6750 gives it.
    static func invalidToken(_ code: String, _ message: String) -> APIError {
        APIError(.unauthorized, code: code, message: message, headers: [.wwwAuthenticate: "Bearer error=\"invalid_token\""])
    }
}
