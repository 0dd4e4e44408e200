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

    public func verify(using algorithm: some JWTAlgorithm) throws {
        try exp.verifyNotExpired()
    }
}
