import Foundation

/// The account's resolved state as the service last told it (`GET /v1/accounts/{id}`), kept on
/// disk so the app can answer feature and limit questions offline.
public struct AccountSnapshot: Sendable, Hashable, Codable {
    public var accountID: String
    /// The tier when the service resolved the account; ``SubsyncClient/tier()`` is the tier now.
    public var tier: String
    public var features: [String]
    public var limits: [String: Limit]
    public var ads: Bool
    public var entitlements: [EntitlementSnapshot]
    /// When the state changes with time alone (an expiry): after it, the client works the tier out
    /// from the entitlements' dates and the cached tiers.
    public var nextTransitionAt: Date?
    /// Each meter's balance (account reads; `nil` in sync answers).
    public var usage: [MeterBalance]?
    /// When the client received this state.
    public var receivedAt: Date?

    enum CodingKeys: String, CodingKey {
        case accountID = "account_id"
        case tier, features, limits, ads, entitlements, usage
        case nextTransitionAt = "next_transition_at"
        case receivedAt = "received_at"
    }
}

/// One entitlement of the account (docs/RESOLUTION.md, "Per entitlement").
public struct EntitlementSnapshot: Sendable, Hashable, Codable {
    public var id: String
    /// The tier it unlocks.
    public var tier: String
    /// `active`, `grace_period`, `billing_retry`, `expired` or `revoked`, when the service resolved it.
    public var status: String
    public var productID: String
    /// When access ends, grace included (`nil`: a lifetime purchase, or nothing left to grant).
    public var expiresAt: Date?
    /// End of the billing grace period, when the store granted one.
    public var gracePeriodExpiresAt: Date?
    public var willRenew: Bool
    /// Why the subscription ended (`cancelled`, `billing_error`, `price_increase_declined`,
    /// `product_unavailable` or `other`), when the store said so; for a "your subscription ended
    /// because…" message.
    public var expirationReason: String?
    /// The product the subscription renews to, while it will renew; differs from ``productID``
    /// when an upgrade, downgrade or crossgrade is pending.
    public var renewalProductID: String?
    /// `pending` (the user has not answered a price increase that needs consent) or `accepted`.
    public var priceIncreaseStatus: String?
    /// When the subscription renews next, while it will renew.
    public var renewalDate: Date?

    enum CodingKeys: String, CodingKey {
        case id, tier, status
        case productID = "product_id"
        case expiresAt = "expires_at"
        case gracePeriodExpiresAt = "grace_period_expires_at"
        case willRenew = "will_renew"
        case expirationReason = "expiration_reason"
        case renewalProductID = "renewal_product_id"
        case priceIncreaseStatus = "price_increase_status"
        case renewalDate = "renewal_date"
    }

    /// Whether it grants access at `now`: it did when resolved (`active` or `grace_period`) and
    /// its access end has not passed since.
    public func grantsAccess(at now: Date) -> Bool {
        guard status == "active" || status == "grace_period" else { return false }
        return expiresAt.map { $0 > now } ?? true
    }
}

/// A limit: a number, or unlimited (`null` on the wire).
public enum Limit: Sendable, Hashable, Codable {
    case limited(Int)
    case unlimited

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        self = container.decodeNil() ? .unlimited : .limited(try container.decode(Int.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .limited(let value): try container.encode(value)
        case .unlimited: try container.encodeNil()
        }
    }
}

/// A meter's balance (docs/USAGE.md): what the account may still spend.
public struct MeterBalance: Sendable, Hashable, Codable {
    public var meter: String
    public var periodStart: Date?
    public var periodEnd: Date?
    public var allowance: Limit
    public var used: Int
    public var rewards: Int
    public var credits: Int
    /// Units that may be spent now, open holds taken off (`nil`: unlimited).
    public var available: Int?
    public var held: Int
    public var overageUnits: Int

    enum CodingKeys: String, CodingKey {
        case meter, allowance, used, rewards, credits, available, held
        case periodStart = "period_start"
        case periodEnd = "period_end"
        case overageUnits = "overage_units"
    }
}

/// The catalogue's tiers (`GET /v1/catalogue`), cached with the state so that the tier an
/// expiry falls back to is known offline.
public struct TierSnapshot: Sendable, Hashable, Codable {
    public var id: String
    /// 0 for the base tier, increasing upwards.
    public var rank: Int
    public var ads: Bool
    public var features: [String]
    public var limits: [String: Limit]
}
