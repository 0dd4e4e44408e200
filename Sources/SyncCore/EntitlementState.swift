import Foundation

/// The resolved state of one entitlement of an account at an instant (docs/RESOLUTION.md,
/// "Per entitlement").
///
/// JSON (snake_case; absent values are written as `null` so every state has the same shape):
/// `id`, `tier`, `status`, `is_active`, `product_id`, `product_kind`, `source_transaction_id`,
/// `original_transaction_id`, `purchased_at`, `expires_at`, `period_ends_at`,
/// `grace_period_expires_at`, `will_renew`, `revoked_at`, `revocation_reason`,
/// `expiration_reason`, `renewal_product_id`, `price_increase_status`, `renewal_date`.
public struct EntitlementState: Sendable, Hashable, Codable, Identifiable {
    /// The entitlement id.
    public var id: String
    /// The tier this entitlement unlocks.
    public var tier: String
    public var status: EntitlementStatus
    /// The product of the source transaction (for `revoked`/`expired` without grants: of the
    /// latest transaction).
    public var productID: String
    public var productKind: ProductKind
    /// The transaction that decides the state: the grant reaching the latest access end, or the
    /// latest transaction when no grant is left.
    public var sourceTransactionID: String
    public var originalTransactionID: String
    /// When the source transaction was purchased.
    public var purchasedAt: Date
    /// When access ends: the latest access end over all grants, grace included
    /// (last-expiry-wins). `nil` for a lifetime purchase, and when no grant is left.
    public var expiresAt: Date?
    /// End of the source's paid period: its `expires_at` (auto-renewable) or stacked end
    /// (non-renewing). Equals ``expiresAt`` except during a grace period. `nil` when ``expiresAt`` is.
    public var periodEndsAt: Date?
    /// End of the source's billing grace period, when the store granted one.
    public var gracePeriodExpiresAt: Date?
    /// Whether the subscription will renew: the source is auto-renewable, still alive and reports
    /// `will_auto_renew` = true.
    public var willRenew: Bool
    /// For `revoked`: the latest revocation time of the source transaction.
    public var revokedAt: Date?
    /// For `revoked`: why.
    public var revocationReason: RevocationReason?
    /// Why the subscription ended, from the renewal info signed latest of the source's
    /// subscription (auto-renewable only; see ``RenewalDetails``).
    public var expirationReason: ExpirationReason?
    /// The product the subscription renews to, while ``willRenew``: differs from ``productID``
    /// when an upgrade, downgrade or crossgrade is pending.
    public var renewalProductID: String?
    /// Where a price increase of the subscription stands (auto-renewable only).
    public var priceIncreaseStatus: PriceIncreaseStatus?
    /// When the subscription renews next, while ``willRenew``.
    public var renewalDate: Date?

    public init(
        id: String, tier: String, status: EntitlementStatus, productID: String, productKind: ProductKind,
        sourceTransactionID: String, originalTransactionID: String, purchasedAt: Date, expiresAt: Date?,
        periodEndsAt: Date?, gracePeriodExpiresAt: Date?, willRenew: Bool, revokedAt: Date?,
        revocationReason: RevocationReason?, expirationReason: ExpirationReason? = nil,
        renewalProductID: String? = nil, priceIncreaseStatus: PriceIncreaseStatus? = nil, renewalDate: Date? = nil
    ) {
        self.id = id
        self.tier = tier
        self.status = status
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

    /// Whether the entitlement gives access now (`active` or `grace_period`).
    public var isActive: Bool { status.grantsAccess }

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

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        tier = try c.decode(String.self, forKey: .tier)
        status = try c.decode(EntitlementStatus.self, forKey: .status)
        // `is_active` is derived from `status`; it is written for consumers and ignored here.
        productID = try c.decode(String.self, forKey: .productID)
        productKind = try c.decode(ProductKind.self, forKey: .productKind)
        sourceTransactionID = try c.decode(String.self, forKey: .sourceTransactionID)
        originalTransactionID = try c.decode(String.self, forKey: .originalTransactionID)
        purchasedAt = try c.decode(Date.self, forKey: .purchasedAt)
        expiresAt = try c.decodeIfPresent(Date.self, forKey: .expiresAt)
        periodEndsAt = try c.decodeIfPresent(Date.self, forKey: .periodEndsAt)
        gracePeriodExpiresAt = try c.decodeIfPresent(Date.self, forKey: .gracePeriodExpiresAt)
        willRenew = try c.decode(Bool.self, forKey: .willRenew)
        revokedAt = try c.decodeIfPresent(Date.self, forKey: .revokedAt)
        revocationReason = try c.decodeIfPresent(RevocationReason.self, forKey: .revocationReason)
        expirationReason = try c.decodeIfPresent(ExpirationReason.self, forKey: .expirationReason)
        renewalProductID = try c.decodeIfPresent(String.self, forKey: .renewalProductID)
        priceIncreaseStatus = try c.decodeIfPresent(PriceIncreaseStatus.self, forKey: .priceIncreaseStatus)
        renewalDate = try c.decodeIfPresent(Date.self, forKey: .renewalDate)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(tier, forKey: .tier)
        try c.encode(status, forKey: .status)
        try c.encode(isActive, forKey: .isActive)
        try c.encode(productID, forKey: .productID)
        try c.encode(productKind, forKey: .productKind)
        try c.encode(sourceTransactionID, forKey: .sourceTransactionID)
        try c.encode(originalTransactionID, forKey: .originalTransactionID)
        try c.encode(purchasedAt, forKey: .purchasedAt)
        try c.encode(expiresAt, forKey: .expiresAt)
        try c.encode(periodEndsAt, forKey: .periodEndsAt)
        try c.encode(gracePeriodExpiresAt, forKey: .gracePeriodExpiresAt)
        try c.encode(willRenew, forKey: .willRenew)
        try c.encode(revokedAt, forKey: .revokedAt)
        try c.encode(revocationReason, forKey: .revocationReason)
        try c.encode(expirationReason, forKey: .expirationReason)
        try c.encode(renewalProductID, forKey: .renewalProductID)
        try c.encode(priceIncreaseStatus, forKey: .priceIncreaseStatus)
        try c.encode(renewalDate, forKey: .renewalDate)
    }
}
