import Foundation

/// What a subscription's renewal info says beyond auto-renew, billing retry and grace
/// (docs/RESOLUTION.md, *Renewal details*): why it ended, what it renews to, where a price
/// increase stands, and when it renews. It describes the *subscription* (all transactions of
/// one original transaction), as of the moment the App Store signed it.
///
/// From a verified `signed_renewal_info` (device reports, App Store notifications, App Store
/// Server API answers) with ``signedAt`` its `signedDate`; or, in development mode, from a
/// device's unsigned fields, with ``signedAt`` `nil`. Among a subscription's renewal details the
/// one signed latest wins as a whole (see ``RenewalMark``); unsigned ones lose to every signed one.
public struct RenewalDetails: Sendable, Hashable, Codable {
    /// Why the subscription ended (`expirationIntent`), when it did.
    public var expirationReason: ExpirationReason?
    /// The product it renews to (`autoRenewProductId`): a pending upgrade, downgrade or
    /// crossgrade when it differs from the current product.
    public var renewalProductID: String?
    /// Where a price increase stands (`priceIncreaseStatus`), when there is one.
    public var priceIncreaseStatus: PriceIncreaseStatus?
    /// When it renews next (`renewalDate`).
    public var renewalDate: Date?
    /// When the App Store signed the renewal info; `nil` for unsigned development-mode fields.
    public var signedAt: Date?

    public init(
        expirationReason: ExpirationReason? = nil, renewalProductID: String? = nil,
        priceIncreaseStatus: PriceIncreaseStatus? = nil, renewalDate: Date? = nil, signedAt: Date? = nil
    ) {
        self.expirationReason = expirationReason
        self.renewalProductID = renewalProductID
        self.priceIncreaseStatus = priceIncreaseStatus
        self.renewalDate = renewalDate
        self.signedAt = signedAt
    }

    /// Whether no detail is known (the signing time aside).
    public var isEmpty: Bool {
        expirationReason == nil && renewalProductID == nil && priceIncreaseStatus == nil && renewalDate == nil
    }

    enum CodingKeys: String, CodingKey {
        case expirationReason = "expiration_reason"
        case renewalProductID = "renewal_product_id"
        case priceIncreaseStatus = "price_increase_status"
        case renewalDate = "renewal_date"
        case signedAt = "signed_at"
    }
}
