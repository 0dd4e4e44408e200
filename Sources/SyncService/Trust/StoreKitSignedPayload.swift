import Foundation
import JWTKit

/// A payload StoreKit or the App Store signs as a JWS with an `x5c` chain (a transaction, renewal
/// info or App Store Server Notification V2). ``StoreKitVerifier`` reads these properties to check
/// the payload against its configuration after the signature and chain verified.
public protocol StoreKitSignedPayload: JWTPayload, Sendable {
    /// When the App Store signed the payload; the chain is validated at this date. `nil` (only
    /// allowed where StoreKit makes it optional) validates at the current time.
    var signedAt: Date? { get }
    /// The bundle id the payload carries, if it carries one.
    var signedBundleID: String? { get }
    /// The raw StoreKit environment (`"Production"`, `"Sandbox"`, `"Xcode"`, ...), if present.
    var signedEnvironment: String? { get }
    /// The app Apple id the payload carries, if it carries one.
    var signedAppAppleID: Int64? { get }
    /// Whether a payload of this type must carry the bundle id (renewal info does not carry one).
    static var carriesBundleID: Bool { get }
    /// Whether a production payload of this type must carry the app Apple id (notifications do).
    static var carriesAppAppleID: Bool { get }
    /// Whether tokens of this type that verified are kept for when they are sent again
    /// (`VerifiedTokenCache`): devices resend transactions and renewal info on every sync;
    /// notifications are handled once each (by their UUID) and carry whole JWS inside, so they
    /// would only take memory.
    static var keepsVerifiedTokens: Bool { get }
}

extension StoreKitSignedPayload {
    /// Payloads carry no app Apple id unless they say so.
    public var signedAppAppleID: Int64? { nil }
    /// Most payloads carry a bundle id.
    public static var carriesBundleID: Bool { true }
    /// Most payloads carry no app Apple id.
    public static var carriesAppAppleID: Bool { false }
    /// Payloads devices send again are kept once verified.
    public static var keepsVerifiedTokens: Bool { true }
    /// Claims are checked by ``StoreKitVerifier``, not by jwt-kit.
    public func verify(using _: some JWTAlgorithm) async throws {}
}
