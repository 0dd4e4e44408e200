import Foundation
import JWTKit

/// The JWT a device presents: `sub` is the account it may act on, `exp` is required, `nbf`
/// (when present) is when it starts to count. Its header's `kid` names the secret that signed it.
public struct AccountToken: JWTPayload, Equatable {
    public var sub: SubjectClaim
    public var exp: ExpirationClaim
    public var iat: IssuedAtClaim?
    public var nbf: NotBeforeClaim?

    public init(accountID: String, expiresAt: Date, issuedAt: Date, notBefore: Date? = nil) {
        self.sub = SubjectClaim(value: accountID)
        self.exp = ExpirationClaim(value: expiresAt)
        self.iat = IssuedAtClaim(value: issuedAt)
        self.nbf = notBefore.map { NotBeforeClaim(value: $0) }
    }

    /// Checks nothing about time: ``Authenticator`` checks `exp` against the service's clock
    /// (``ServiceClock``) once the signature has verified, so token expiry is testable without
    /// waiting. Verify tokens through ``Authenticator/authenticate(_:)``, never with bare JWTKit.
    public func verify(using algorithm: some JWTAlgorithm) throws {}

    /// Whether the token has expired at `now`.
    public func isExpired(at now: Date) -> Bool {
        exp.value <= now
    }

    /// Whether the token is not valid yet at `now`, allowing `leeway` for clocks of other
    /// servers that mint tokens.
    public func isNotYetValid(at now: Date, leeway: TimeInterval = 60) -> Bool {
        guard let nbf else { return false }
        return nbf.value > now.addingTimeInterval(leeway)
    }
}
