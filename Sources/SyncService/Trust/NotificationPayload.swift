import Foundation

/// The decoded payload of an App Store Server Notification V2 (Apple's `ResponseBodyV2DecodedPayload`).
/// The app's identity and environment sit in `data`, or `summary`, or `externalPurchaseToken`.
public struct NotificationPayload: StoreKitSignedPayload, Codable, Equatable, Hashable {
    /// The app data of most notification types.
    public struct AppData: Codable, Sendable, Equatable, Hashable {
        /// The app's bundle id.
        public var bundleId: String?
        /// The app's Apple id (absent in the sandbox).
        public var appAppleId: Int64?
        /// `Production`, `Sandbox`, ...
        public var environment: String?
        /// The app's bundle version.
        public var bundleVersion: String?
        /// The signed transaction (a JWS to verify separately).
        public var signedTransactionInfo: String?
        /// The signed renewal info (a JWS to verify separately).
        public var signedRenewalInfo: String?
        /// The subscription status.
        public var status: Int?
    }

    /// The summary of a `RENEWAL_EXTENSION` request.
    public struct Summary: Codable, Sendable, Equatable, Hashable {
        /// The app's bundle id.
        public var bundleId: String?
        /// The app's Apple id.
        public var appAppleId: Int64?
        /// `Production` or `Sandbox`.
        public var environment: String?
        /// The id of the renewal extension request.
        public var requestIdentifier: String?
    }

    /// The external purchase token of an `EXTERNAL_PURCHASE_TOKEN` notification.
    public struct ExternalPurchaseToken: Codable, Sendable, Equatable, Hashable {
        /// The token's id; sandbox ids start with `SANDBOX`.
        public var externalPurchaseId: String?
        /// The app's bundle id.
        public var bundleId: String?
        /// The app's Apple id.
        public var appAppleId: Int64?
    }

    /// The notification type, e.g. `SUBSCRIBED`, `DID_RENEW`, `REFUND`, `TEST`.
    public var notificationType: String
    /// The subtype, if any.
    public var subtype: String?
    /// The unique id of the notification.
    public var notificationUUID: String
    /// The notification version (`2.0`).
    public var version: String?
    /// When the App Store signed the notification.
    public var signedDate: Date?
    /// The app data.
    public var data: AppData?
    /// The renewal extension summary.
    public var summary: Summary?
    /// The external purchase token.
    public var externalPurchaseToken: ExternalPurchaseToken?

    /// See ``StoreKitSignedPayload/signedAt``.
    public var signedAt: Date? { signedDate }
    /// See ``StoreKitSignedPayload/signedBundleID``.
    public var signedBundleID: String? {
        data?.bundleId ?? summary?.bundleId ?? externalPurchaseToken?.bundleId
    }
    /// See ``StoreKitSignedPayload/signedEnvironment``.
    public var signedEnvironment: String? {
        if let environment = data?.environment ?? summary?.environment { return environment }
        guard let id = externalPurchaseToken?.externalPurchaseId else { return nil }
        return id.hasPrefix("SANDBOX") ? "Sandbox" : "Production"
    }
    /// See ``StoreKitSignedPayload/signedAppAppleID``.
    public var signedAppAppleID: Int64? {
        data?.appAppleId ?? summary?.appAppleId ?? externalPurchaseToken?.appAppleId
    }
    /// Production notifications carry the app Apple id.
    public static var carriesAppAppleID: Bool { true }
    /// Each notification is handled once (by its UUID), and it carries whole JWS: not kept.
    public static var keepsVerifiedTokens: Bool { false }
}
