import Foundation

/// The decoded payload of a signed subscription renewal info (Apple's `JWSRenewalInfoDecodedPayload`).
/// It carries no bundle id, so only the chain, signature and environment are checked.
public struct JWSRenewalInfoPayload: StoreKitSignedPayload, Codable, Equatable, Hashable {
    /// The server environment: `Production`, `Sandbox`, `Xcode` or `LocalTesting`.
    public var environment: String
    /// When the App Store signed the payload.
    public var signedDate: Date
    /// The original transaction id of the subscription.
    public var originalTransactionId: String?
    /// The product the subscription renews to.
    public var autoRenewProductId: String?
    /// The current product.
    public var productId: String?
    /// `1` when auto-renew is on, `0` when off.
    public var autoRenewStatus: Int?
    /// Why the subscription expired, if it did.
    public var expirationIntent: Int?
    /// When the billing grace period ends.
    public var gracePeriodExpiresDate: Date?
    /// Whether the App Store is retrying a failed renewal.
    public var isInBillingRetryPeriod: Bool?
    /// The type of a pending offer.
    public var offerType: Int?
    /// The pending offer's identifier.
    public var offerIdentifier: String?
    /// The status of a price increase.
    public var priceIncreaseStatus: Int?
    /// The earliest start of a run of continuous subscription.
    public var recentSubscriptionStartDate: Date?
    /// When the next renewal happens.
    public var renewalDate: Date?
    /// The renewal price in milliunits.
    public var renewalPrice: Int64?
    /// The currency of ``renewalPrice``.
    public var currency: String?
    /// The UUID the app associated with the purchase, if any.
    public var appAccountToken: String?

    /// See ``StoreKitSignedPayload/signedAt``.
    public var signedAt: Date? { signedDate }
    /// Renewal info carries no bundle id.
    public var signedBundleID: String? { nil }
    /// See ``StoreKitSignedPayload/signedEnvironment``.
    public var signedEnvironment: String? { environment }
    /// Renewal info carries no bundle id.
    public static var carriesBundleID: Bool { false }
}
