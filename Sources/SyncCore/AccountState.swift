import Foundation

/// The resolved state of an account at an instant: what the app should unlock (docs/RESOLUTION.md,
/// "Account").
///
/// JSON: `tier`, `features` (sorted), `limits` (`null` = unlimited), `ads`, `entitlements`
/// (sorted by id), `next_transition_at` (`null` when nothing will change without a new report).
public struct AccountState: Sendable, Hashable, Codable {
    /// The highest tier among entitlements that grant access now; the base tier otherwise.
    public var tier: String
    /// The tier's features, including those inherited from lower tiers, sorted.
    public var features: [String]
    /// The tier's limits (inherited unless overridden).
    public var limits: [String: LimitValue]
    /// Whether ads are shown (the tier's `ads` flag; in the default catalogue only free shows ads).
    public var ads: Bool
    /// Every entitlement the account has at least one known transaction for, sorted by id.
    public var entitlements: [EntitlementState]
    /// The earliest instant after the resolution time at which this state would change with no
    /// new report (an expiry, a grace period end, the end of a stacked pass). The sweeper should
    /// resolve the account again at (or just after) this instant.
    public var nextTransitionAt: Date?

    public init(
        tier: String, features: [String], limits: [String: LimitValue], ads: Bool,
        entitlements: [EntitlementState], nextTransitionAt: Date?
    ) {
        self.tier = tier
        self.features = features
        self.limits = limits
        self.ads = ads
        self.entitlements = entitlements
        self.nextTransitionAt = nextTransitionAt
    }

    /// The state of entitlement `id`, if the account has any transaction for it.
    public func entitlement(_ id: String) -> EntitlementState? {
        entitlements.first { $0.id == id }
    }

    /// Whether the resolved tier includes `feature`.
    public func allows(_ feature: String) -> Bool {
        features.contains(feature)
    }

    public enum CodingKeys: String, CodingKey {
        case tier, features, limits, ads, entitlements
        case nextTransitionAt = "next_transition_at"
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(tier, forKey: .tier)
        try c.encode(features, forKey: .features)
        try c.encode(limits, forKey: .limits)
        try c.encode(ads, forKey: .ads)
        try c.encode(entitlements, forKey: .entitlements)
        try c.encode(nextTransitionAt, forKey: .nextTransitionAt)
    }
}
