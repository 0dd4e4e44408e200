import Foundation

/// What one device saw of one transaction at one moment (docs/RESOLUTION.md, "Reports and trust").
///
/// The wire fields are the snake_case JSON keys listed in ``CodingKeys``; dates are encoded with
/// whatever date strategy the caller's encoder uses (the service uses RFC 3339 with fractional
/// seconds). ``trust`` is *not* on the wire: decoding always yields ``ReportTrust/unverifiedDevice``
/// and the server overwrites it after verifying `signed_transaction`.
///
/// `report_id` is the idempotency key: two reports with the same id are assumed to be the same
/// report (the store keeps the first one), which is what keeps the resolver's order total.
public struct Report: Sendable, Equatable, Hashable, Codable {
    /// Client-generated id (a UUID in practice); the idempotency key of the sync call.
    public var reportID: String
    /// The reporting device.
    public var deviceID: String
    /// When the device observed this state (device clock, so not trusted for precedence beyond ties).
    public var observedAt: Date
    /// The store product id.
    public var productID: String
    /// The id of the first transaction of the subscription (constant across renewals).
    public var originalTransactionID: String
    /// The id of this transaction; the aggregation key together with the account.
    public var transactionID: String
    /// When the transaction was purchased (for a renewal: when that period was bought).
    public var purchasedAt: Date
    /// End of the paid period, for auto-renewable subscriptions.
    public var expiresAt: Date?
    /// End of the billing grace period, when a renewal failed and the store granted grace.
    public var gracePeriodExpiresAt: Date?
    /// When the store revoked (refunded) the transaction.
    public var revokedAt: Date?
    /// Why it was revoked.
    public var revocationReason: RevocationReason?
    /// The transaction was superseded by an upgrade to a higher subscription. Absent = false.
    public var isUpgraded: Bool
    /// The subscription's auto-renew preference, when known.
    public var willAutoRenew: Bool?
    /// The store is retrying a failed renewal. Absent = false.
    public var inBillingRetry: Bool
    /// The StoreKit environment.
    public var environment: StoreEnvironment?
    /// The StoreKit 2 JWS of the transaction, verified by the server.
    public var signedTransaction: String?
    /// What the subscription's renewal info says of its end and next renewal: from a verified
    /// `signed_renewal_info` (with its signing time), or in development mode from the unsigned
    /// wire fields `expiration_reason`, `renewal_product_id`, `price_increase_status` and
    /// `renewal_date` (without one). `nil` when the report says nothing of it.
    public var renewal: RenewalDetails?
    /// Server-side trust; see ``ReportTrust``. Not encoded or decoded.
    public var trust: ReportTrust

    public init(
        reportID: String,
        deviceID: String,
        observedAt: Date,
        productID: String,
        originalTransactionID: String,
        transactionID: String,
        purchasedAt: Date,
        expiresAt: Date? = nil,
        gracePeriodExpiresAt: Date? = nil,
        revokedAt: Date? = nil,
        revocationReason: RevocationReason? = nil,
        isUpgraded: Bool = false,
        willAutoRenew: Bool? = nil,
        inBillingRetry: Bool = false,
        environment: StoreEnvironment? = nil,
        signedTransaction: String? = nil,
        renewal: RenewalDetails? = nil,
        trust: ReportTrust = .unverifiedDevice
    ) {
        self.reportID = reportID
        self.deviceID = deviceID
        self.observedAt = observedAt
        self.productID = productID
        self.originalTransactionID = originalTransactionID
        self.transactionID = transactionID
        self.purchasedAt = purchasedAt
        self.expiresAt = expiresAt
        self.gracePeriodExpiresAt = gracePeriodExpiresAt
        self.revokedAt = revokedAt
        self.revocationReason = revocationReason
        self.isUpgraded = isUpgraded
        self.willAutoRenew = willAutoRenew
        self.inBillingRetry = inBillingRetry
        self.environment = environment
        self.signedTransaction = signedTransaction
        self.renewal = renewal
        self.trust = trust
    }

    /// The wire keys (snake_case, explicit so any `JSONEncoder` produces the same JSON).
    public enum CodingKeys: String, CodingKey, CaseIterable {
        case reportID = "report_id"
        case deviceID = "device_id"
        case observedAt = "observed_at"
        case productID = "product_id"
        case originalTransactionID = "original_transaction_id"
        case transactionID = "transaction_id"
        case purchasedAt = "purchased_at"
        case expiresAt = "expires_at"
        case gracePeriodExpiresAt = "grace_period_expires_at"
        case revokedAt = "revoked_at"
        case revocationReason = "revocation_reason"
        case isUpgraded = "is_upgraded"
        case willAutoRenew = "will_auto_renew"
        case inBillingRetry = "in_billing_retry"
        case environment
        case signedTransaction = "signed_transaction"
        /// ``RenewalDetails/expirationReason`` of ``renewal`` (unsigned, development mode).
        case expirationReason = "expiration_reason"
        /// ``RenewalDetails/renewalProductID`` of ``renewal`` (unsigned, development mode).
        case renewalProductID = "renewal_product_id"
        /// ``RenewalDetails/priceIncreaseStatus`` of ``renewal`` (unsigned, development mode).
        case priceIncreaseStatus = "price_increase_status"
        /// ``RenewalDetails/renewalDate`` of ``renewal`` (unsigned, development mode).
        case renewalDate = "renewal_date"
        /// Wire only: the StoreKit 2 renewal info JWS a device may send beside
        /// `signed_transaction`. The sync API verifies it and takes auto-renew, billing retry and
        /// grace period from it; a ``Report`` never encodes or decodes it.
        case signedRenewalInfo = "signed_renewal_info"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        reportID = try c.decode(String.self, forKey: .reportID)
        deviceID = try c.decode(String.self, forKey: .deviceID)
        observedAt = try c.decode(Date.self, forKey: .observedAt)
        productID = try c.decode(String.self, forKey: .productID)
        originalTransactionID = try c.decode(String.self, forKey: .originalTransactionID)
        transactionID = try c.decode(String.self, forKey: .transactionID)
        purchasedAt = try c.decode(Date.self, forKey: .purchasedAt)
        expiresAt = try c.decodeIfPresent(Date.self, forKey: .expiresAt)
        gracePeriodExpiresAt = try c.decodeIfPresent(Date.self, forKey: .gracePeriodExpiresAt)
        revokedAt = try c.decodeIfPresent(Date.self, forKey: .revokedAt)
        revocationReason = try c.decodeIfPresent(RevocationReason.self, forKey: .revocationReason)
        isUpgraded = try c.decodeIfPresent(Bool.self, forKey: .isUpgraded) ?? false
        willAutoRenew = try c.decodeIfPresent(Bool.self, forKey: .willAutoRenew)
        inBillingRetry = try c.decodeIfPresent(Bool.self, forKey: .inBillingRetry) ?? false
        environment = try c.decodeIfPresent(StoreEnvironment.self, forKey: .environment)
        signedTransaction = try c.decodeIfPresent(String.self, forKey: .signedTransaction)
        let details = RenewalDetails(
            expirationReason: try c.decodeIfPresent(ExpirationReason.self, forKey: .expirationReason),
            renewalProductID: try c.decodeIfPresent(String.self, forKey: .renewalProductID),
            priceIncreaseStatus: try c.decodeIfPresent(PriceIncreaseStatus.self, forKey: .priceIncreaseStatus),
            renewalDate: try c.decodeIfPresent(Date.self, forKey: .renewalDate))
        renewal = details.isEmpty ? nil : details
        trust = .unverifiedDevice
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(reportID, forKey: .reportID)
        try c.encode(deviceID, forKey: .deviceID)
        try c.encode(observedAt, forKey: .observedAt)
        try c.encode(productID, forKey: .productID)
        try c.encode(originalTransactionID, forKey: .originalTransactionID)
        try c.encode(transactionID, forKey: .transactionID)
        try c.encode(purchasedAt, forKey: .purchasedAt)
        try c.encodeIfPresent(expiresAt, forKey: .expiresAt)
        try c.encodeIfPresent(gracePeriodExpiresAt, forKey: .gracePeriodExpiresAt)
        try c.encodeIfPresent(revokedAt, forKey: .revokedAt)
        try c.encodeIfPresent(revocationReason, forKey: .revocationReason)
        try c.encode(isUpgraded, forKey: .isUpgraded)
        try c.encodeIfPresent(willAutoRenew, forKey: .willAutoRenew)
        try c.encode(inBillingRetry, forKey: .inBillingRetry)
        try c.encodeIfPresent(environment, forKey: .environment)
        try c.encodeIfPresent(signedTransaction, forKey: .signedTransaction)
        try c.encodeIfPresent(renewal?.expirationReason, forKey: .expirationReason)
        try c.encodeIfPresent(renewal?.renewalProductID, forKey: .renewalProductID)
        try c.encodeIfPresent(renewal?.priceIncreaseStatus, forKey: .priceIncreaseStatus)
        try c.encodeIfPresent(renewal?.renewalDate, forKey: .renewalDate)
    }
}
