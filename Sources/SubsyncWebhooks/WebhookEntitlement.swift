import Foundation

/// The resolved state of one entitlement of an account (`previous`, `current`, and the items of
/// `state.entitlements`).
public struct WebhookEntitlement: Sendable, Hashable, Codable {
    /// The status of an entitlement.
    ///
    /// A struct rather than an enum so that statuses added to subsync later still decode.
    public struct Status: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
        /// The wire string, such as `grace_period`.
        public let rawValue: String

        /// The status whose wire string is `rawValue` (any string is accepted).
        public init(rawValue: String) {
            self.rawValue = rawValue
        }

        /// Decodes the wire string.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            self.rawValue = try container.decode(String.self)
        }

        /// Encodes the wire string.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(rawValue)
        }

        /// The wire string.
        public var description: String { rawValue }

        /// Paid for: access until the period end.
        public static let active = Status(rawValue: "active")
        /// Billing failed and the store granted grace: access until the grace period ends.
        public static let gracePeriod = Status(rawValue: "grace_period")
        /// Billing failed and the store is retrying: no access.
        public static let billingRetry = Status(rawValue: "billing_retry")
        /// Ended: no access.
        public static let expired = Status(rawValue: "expired")
        /// Refunded or otherwise revoked: no access.
        public static let revoked = Status(rawValue: "revoked")

        /// Whether this status gives access (`active` or `grace_period`).
        public var grantsAccess: Bool { self == .active || self == .gracePeriod }
    }

    /// The entitlement's id.
    public var id: String
    /// The tier this entitlement unlocks.
    public var tier: String
    /// The entitlement's status.
    public var status: Status
    /// `is_active` as sent (it may be absent); see ``grantsAccess``.
    public var isActive: Bool?
    /// The product of the transaction that decides the state.
    public var productID: String
    /// `auto_renewable`, `non_renewing`, `non_consumable` or `consumable`.
    public var productKind: String
    /// The transaction that decides the state.
    public var sourceTransactionID: String
    /// The store's original transaction id of that transaction.
    public var originalTransactionID: String
    /// When the source transaction was purchased.
    public var purchasedAt: Date
    /// When access ends, grace included; `nil` for a lifetime purchase or when no grant is left.
    public var expiresAt: Date?
    /// End of the paid period (equals ``expiresAt`` except during a grace period).
    public var periodEndsAt: Date?
    /// End of the billing grace period, when the store granted one.
    public var gracePeriodExpiresAt: Date?
    /// Whether the subscription will renew.
    public var willRenew: Bool
    /// For `revoked`: when.
    public var revokedAt: Date?
    /// For `revoked`: why (such as `developer_issue` or `other`).
    public var revocationReason: String?
    /// Why the subscription ended (`cancelled`, `billing_error`, `price_increase_declined`,
    /// `product_unavailable` or `other`), from the renewal info the App Store signed latest.
    public var expirationReason: String?
    /// The product the subscription renews to, while it will renew: a pending upgrade, downgrade
    /// or crossgrade when it differs from ``productID``.
    public var renewalProductID: String?
    /// `pending` (a price increase awaits the subscriber's consent) or `accepted`.
    public var priceIncreaseStatus: String?
    /// When the subscription renews next, while it will renew.
    public var renewalDate: Date?

    /// An entitlement state with the given fields.
    public init(
        id: String, tier: String, status: Status, isActive: Bool? = nil, productID: String, productKind: String,
        sourceTransactionID: String, originalTransactionID: String, purchasedAt: Date, expiresAt: Date?,
        periodEndsAt: Date?, gracePeriodExpiresAt: Date?, willRenew: Bool, revokedAt: Date?,
        revocationReason: String?, expirationReason: String? = nil, renewalProductID: String? = nil,
        priceIncreaseStatus: String? = nil, renewalDate: Date? = nil
    ) {
        self.id = id
        self.tier = tier
        self.status = status
        self.isActive = isActive
        self.productID = productID
        self.productKind = productKind
        self.sourceTransactionID = sourceTransactionID
        self.originalTransactionID = originalTransactionID
        self.purchasedAt = purchasedAt
        self.expiresAt = expiresAt
        self.periodEndsAt = periodEndsAt
        self.gracePeriodExpiresAt = gracePeriodExpiresAt
        self.willRenew = willRenew
        self.revokedAt = revokedAt
        self.revocationReason = revocationReason
        self.expirationReason = expirationReason
        self.renewalProductID = renewalProductID
        self.priceIncreaseStatus = priceIncreaseStatus
        self.renewalDate = renewalDate
    }

    /// Whether the entitlement gives access: `is_active` when sent, otherwise derived from
    /// ``status``.
    public var grantsAccess: Bool { isActive ?? status.grantsAccess }

    /// The JSON keys.
    public enum CodingKeys: String, CodingKey {
        case id, tier, status
        case isActive = "is_active"
        case productID = "product_id"
        case productKind = "product_kind"
        case sourceTransactionID = "source_transaction_id"
        case originalTransactionID = "original_transaction_id"
        case purchasedAt = "purchased_at"
        case expiresAt = "expires_at"
        case periodEndsAt = "period_ends_at"
        case gracePeriodExpiresAt = "grace_period_expires_at"
        case willRenew = "will_renew"
        case revokedAt = "revoked_at"
        case revocationReason = "revocation_reason"
        case expirationReason = "expiration_reason"
        case renewalProductID = "renewal_product_id"
        case priceIncreaseStatus = "price_increase_status"
        case renewalDate = "renewal_date"
    }

    /// Decodes an entitlement; dates are RFC 3339 with or without fractional seconds.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        tier = try c.decode(String.self, forKey: .tier)
        status = try c.decode(Status.self, forKey: .status)
        isActive = try c.decodeIfPresent(Bool.self, forKey: .isActive)
        productID = try c.decode(String.self, forKey: .productID)
        productKind = try c.decode(String.self, forKey: .productKind)
        sourceTransactionID = try c.decode(String.self, forKey: .sourceTransactionID)
        originalTransactionID = try c.decode(String.self, forKey: .originalTransactionID)
        purchasedAt = try c.decodeRFC3339(forKey: .purchasedAt)
        expiresAt = try c.decodeRFC3339IfPresent(forKey: .expiresAt)
        periodEndsAt = try c.decodeRFC3339IfPresent(forKey: .periodEndsAt)
        gracePeriodExpiresAt = try c.decodeRFC3339IfPresent(forKey: .gracePeriodExpiresAt)
        willRenew = try c.decode(Bool.self, forKey: .willRenew)
        revokedAt = try c.decodeRFC3339IfPresent(forKey: .revokedAt)
        revocationReason = try c.decodeIfPresent(String.self, forKey: .revocationReason)
        expirationReason = try c.decodeIfPresent(String.self, forKey: .expirationReason)
        renewalProductID = try c.decodeIfPresent(String.self, forKey: .renewalProductID)
        priceIncreaseStatus = try c.decodeIfPresent(String.self, forKey: .priceIncreaseStatus)
        renewalDate = try c.decodeRFC3339IfPresent(forKey: .renewalDate)
    }

    /// Encodes every key (`is_active` only when known), `null` where a value is absent.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(tier, forKey: .tier)
        try c.encode(status, forKey: .status)
        try c.encodeIfPresent(isActive, forKey: .isActive)
        try c.encode(productID, forKey: .productID)
        try c.encode(productKind, forKey: .productKind)
        try c.encode(sourceTransactionID, forKey: .sourceTransactionID)
        try c.encode(originalTransactionID, forKey: .originalTransactionID)
        try c.encodeRFC3339(purchasedAt, forKey: .purchasedAt)
        try c.encodeRFC3339(expiresAt, forKey: .expiresAt)
        try c.encodeRFC3339(periodEndsAt, forKey: .periodEndsAt)
        try c.encodeRFC3339(gracePeriodExpiresAt, forKey: .gracePeriodExpiresAt)
        try c.encode(willRenew, forKey: .willRenew)
        try c.encodeRFC3339(revokedAt, forKey: .revokedAt)
        try c.encode(revocationReason, forKey: .revocationReason)
        try c.encode(expirationReason, forKey: .expirationReason)
        try c.encode(renewalProductID, forKey: .renewalProductID)
        try c.encode(priceIncreaseStatus, forKey: .priceIncreaseStatus)
        try c.encodeRFC3339(renewalDate, forKey: .renewalDate)
    }
}
