import Crypto
import Foundation
import JWTKit
import SyncCore

/// The claims of the JWT that authorizes every App Store Server API request, as Apple specifies
/// them ("Generating JSON Web Tokens for API requests").
struct AppStoreAPIClaims: JWTPayload {
    var iss: IssuerClaim
    var iat: IssuedAtClaim
    var exp: ExpirationClaim
    var aud: AudienceClaim
    var bid: String

    func verify(using _: some JWTAlgorithm) async throws {}
}

/// Signs the bearer tokens of App Store Server API requests (ES256, `kid`, `typ` JWT; `iss`, `iat`,
/// `exp`, `aud` `appstoreconnect-v1`, `bid`) and reuses one until shortly before it expires.
actor AppStoreAPITokenSigner {
    /// How long a token is valid (Apple allows up to 60 minutes).
    static let lifetime: TimeInterval = 5 * 60
    /// A token is replaced this long before it expires, so none expires on its way.
    static let renewalMargin: TimeInterval = 60

    private let keys = JWTKeyCollection()
    private let configuration: AppStoreAPIConfiguration
    private let clock: any ServiceClock
    private var current: (token: String, expires: Date)?
    /// Adds the key to `keys` once; every caller awaits the same task (the actor is reentrant
    /// across the `await`).
    private var keyAdded: Task<Void, any Error>?

    init(configuration: AppStoreAPIConfiguration, clock: any ServiceClock) {
        self.configuration = configuration
        self.clock = clock
    }

    /// A valid token at the clock's now.
    func token() async throws -> String {
        let now = clock.now()
        if let current, current.expires.addingTimeInterval(-Self.renewalMargin) > now { return current.token }
        let adding = keyAdded ?? Task { [keys, configuration] in
            await keys.add(ecdsa: try ES256PrivateKey(backing: configuration.privateKey), kid: JWKIdentifier(string: configuration.keyID))
        }
        keyAdded = adding
        try await adding.value
        if let current, current.expires.addingTimeInterval(-Self.renewalMargin) > now { return current.token }
        // Whole seconds, as JWT NumericDate is read by Apple.
        let issued = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
        let expires = issued.addingTimeInterval(Self.lifetime)
        let claims = AppStoreAPIClaims(
            iss: IssuerClaim(value: configuration.issuerID), iat: IssuedAtClaim(value: issued), exp: ExpirationClaim(value: expires),
            aud: AudienceClaim(value: "appstoreconnect-v1"), bid: configuration.bundleID)
        let token = try await keys.sign(claims, kid: JWKIdentifier(string: configuration.keyID), header: ["typ": "JWT"])
        current = (token, expires)
        return token
    }
}
