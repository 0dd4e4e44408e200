import Foundation

/// The decoded payload of a StoreKit 2 signed transaction (Apple's `JWSTransactionDecodedPayload`).
///
/// Field names are StoreKit's JSON keys. Dates are milliseconds since 1970 on the wire, possibly
/// fractional (Xcode's test signer); decode with ``StoreKitVerifier/payloadDecoder``. Enumerated
/// values are kept as StoreKit's raw strings or numbers so that a new value does not reject a
/// genuinely signed transaction. As in Apple's library every field but `signedDate` is optional here;
/// ``VerifiedTransaction/report(reportID:deviceID:observedAt:)`` requires the ones a report needs.
public struct JWSTransactionPayload: StoreKitSignedPayload, Codable, Equatable, Hashable {
    /// The unique id of the transaction.
    public var transactionId: String?
    /// The id of the original purchase (constant across renewals).
    public var originalTransactionId: String?
    /// The app's bundle id.
    public var bundleId: String?
    /// The product id of the in-app purchase.
    public var productId: String?
    /// When the App Store charged the account (for a renewal: that period's purchase).
    public var purchaseDate: Date?
    /// When the original transaction was purchased.
    public var originalPurchaseDate: Date?
    /// When the subscription period ends (auto-renewable subscriptions).
    public var expiresDate: Date?
    /// When the App Store refunded or revoked the transaction.
    public var revocationDate: Date?
    /// Why it was revoked: `0` other, `1` an issue in the app.
    public var revocationReason: Int?
    /// Whether the transaction was superseded by an upgrade.
    public var isUpgraded: Bool?
    /// The product type (`Auto-Renewable Subscription`, `Non-Consumable`, `Consumable`, `Non-Renewing Subscription`).
    public var type: String?
    /// The server environment: `Production`, `Sandbox`, `Xcode` or `LocalTesting`.
    public var environment: String?
    /// When the App Store signed the payload.
    public var signedDate: Date
    /// The UUID the app associated with the purchase, if any.
    public var appAccountToken: String?
    /// The id of subscription purchase events across devices.
    public var webOrderLineItemId: String?
    /// `PURCHASED` or `FAMILY_SHARED`.
    public var inAppOwnershipType: String?
    /// The type of offer redeemed, if any.
    public var offerType: Int?
    /// The offer's identifier, if any.
    public var offerIdentifier: String?
    /// The offer's payment mode, if any.
    public var offerDiscountType: String?
    /// The three-letter App Store country code.
    public var storefront: String?
    /// Apple's storefront identifier.
    public var storefrontId: String?
    /// The price in milliunits of ``currency``.
    public var price: Int64?
    /// The ISO 4217 currency code of ``price``.
    public var currency: String?
    /// The number of consumable products purchased.
    public var quantity: Int?
    /// The subscription group of the product.
    public var subscriptionGroupIdentifier: String?
    /// `PURCHASE` or `RENEWAL`.
    public var transactionReason: String?
    /// The app transaction id, when the App Store provides it.
    public var appTransactionId: String?

    /// Creates a payload (for tests and for re-encoding).
    public init(
        transactionId: String?, originalTransactionId: String?, bundleId: String?, productId: String?,
        purchaseDate: Date?, originalPurchaseDate: Date? = nil, expiresDate: Date? = nil,
        revocationDate: Date? = nil, revocationReason: Int? = nil, isUpgraded: Bool? = nil,
        type: String? = nil, environment: String?, signedDate: Date, appAccountToken: String? = nil,
        webOrderLineItemId: String? = nil, inAppOwnershipType: String? = nil, offerType: Int? = nil,
        offerIdentifier: String? = nil, offerDiscountType: String? = nil, storefront: String? = nil,
        storefrontId: String? = nil, price: Int64? = nil, currency: String? = nil, quantity: Int? = nil,
        subscriptionGroupIdentifier: String? = nil, transactionReason: String? = nil,
        appTransactionId: String? = nil
    ) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.bundleId = bundleId
        self.productId = productId
        self.purchaseDate = purchaseDate
        self.originalPurchaseDate = originalPurchaseDate
        self.expiresDate = expiresDate
        self.revocationDate = revocationDate
        self.revocationReason = revocationReason
        self.isUpgraded = isUpgraded
        self.type = type
        self.environment = environment
        self.signedDate = signedDate
        self.appAccountToken = appAccountToken
        self.webOrderLineItemId = webOrderLineItemId
        self.inAppOwnershipType = inAppOwnershipType
        self.offerType = offerType
        self.offerIdentifier = offerIdentifier
        self.offerDiscountType = offerDiscountType
        self.storefront = storefront
        self.storefrontId = storefrontId
        self.price = price
        self.currency = currency
        self.quantity = quantity
        self.subscriptionGroupIdentifier = subscriptionGroupIdentifier
        self.transactionReason = transactionReason
        self.appTransactionId = appTransactionId
    }

    /// See ``StoreKitSignedPayload/signedAt``.
    public var signedAt: Date? { signedDate }
    /// See ``StoreKitSignedPayload/signedBundleID``.
    public var signedBundleID: String? { bundleId }
    /// See ``StoreKitSignedPayload/signedEnvironment``.
    public var signedEnvironment: String? { environment }
}
