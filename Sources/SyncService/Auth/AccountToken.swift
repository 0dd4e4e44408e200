import Foundation
import JWTKit

/// The JWT a device presents: `sub` is the account it may act on, `exp` is required.
public struct AccountToken: JWTPayload, Equatable {
    public var sub: SubjectClaim
    public var exp: ExpirationClaim
    public var iat: IssuedAtClaim?

    public init(accountID: String, expiresAt: Date, issuedAt: Date = Date()) {
        self.sub = SubjectClaim(value: accountID)
        self.exp = ExpirationClaim(value: expiresAt)
        self.iat = IssuedAtClaim(value: issuedAt)
    }

    /// Checks nothing about time: ``Authenticator`` checks `exp` against the service's clock
    /// (``ServiceClock``) once the signature has verified, so token expiry is testable without
    /// waiting. Verify tokens through ``Authenticator/authenticate(_:)``, never with bare JWTKit.
    public func verify(using algorithm: some JWTAlgorithm) throws {}

    /// Whether the token has expired at `now`.
    public func isExpired(at now: Date) -> Bool {
        exp.value <= now
    }
}
