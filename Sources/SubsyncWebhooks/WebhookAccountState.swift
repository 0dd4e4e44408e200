import Foundation

/// The account's full resolved state after an event (`data.state`): what the app should unlock.
///
/// Every event carries it, so the state of the latest event applied is the account's state.
public struct WebhookAccountState: Sendable, Hashable, Codable {
    /// The highest tier among entitlements that grant access; the base tier otherwise.
    public var tier: String
    /// The tier's features (including inherited ones), sorted.
    public var features: [String]
    /// The tier's limits by name (`null` in JSON: unlimited).
    public var limits: [String: WebhookLimit]
    /// Whether ads are shown.
    public var ads: Bool
    /// Every entitlement the account has, sorted by id.
    public var entitlements: [WebhookEntitlement]
    /// When this state will change with no new purchase report (an expiry, a grace period's
    /// end); `nil` when nothing is scheduled.
    public var nextTransitionAt: Date?

    /// An account state with the given fields.
    public init(
        tier: String, features: [String], limits: [String: WebhookLimit], ads: Bool,
        entitlements: [WebhookEntitlement], nextTransitionAt: Date?
    ) {
        self.tier = tier
        self.features = features
        self.limits = limits
        self.ads = ads
        self.entitlements = entitlements
        self.nextTransitionAt = nextTransitionAt
    }

    /// The state of entitlement `id`, if the account has it.
    public func entitlement(_ id: String) -> WebhookEntitlement? {
        entitlements.first { $0.id == id }
    }

    /// Whether the tier includes `feature`.
    public func allows(_ feature: String) -> Bool {
        features.contains(feature)
    }

    /// The JSON keys.
    public enum CodingKeys: String, CodingKey {
        case tier, features, limits, ads, entitlements
        case nextTransitionAt = "next_transition_at"
    }

    /// Decodes `data.state`; a limit of `null` is ``WebhookLimit/unlimited``.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        tier = try c.decode(String.self, forKey: .tier)
        features = try c.decode([String].self, forKey: .features)
        let limitsContainer = try c.nestedContainer(keyedBy: AnyCodingKey.self, forKey: .limits)
        var limits: [String: WebhookLimit] = [:]
        for key in limitsContainer.allKeys {
            let limit: WebhookLimit
            if let value = try limitsContainer.decodeIfPresent(Int.self, forKey: key) {
                limit = .limited(value)
            } else {
                limit = .unlimited
            }
            limits[key.stringValue] = limit
        }
        self.limits = limits
        ads = try c.decode(Bool.self, forKey: .ads)
        entitlements = try c.decode([WebhookEntitlement].self, forKey: .entitlements)
        nextTransitionAt = try c.decodeRFC3339IfPresent(forKey: .nextTransitionAt)
    }

    /// Encodes every key, `null` where a value is absent (and for unlimited limits).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(tier, forKey: .tier)
        try c.encode(features, forKey: .features)
        var limitsContainer = c.nestedContainer(keyedBy: AnyCodingKey.self, forKey: .limits)
        for (name, limit) in limits.sorted(by: { $0.key < $1.key }) {
            switch limit {
            case .limited(let value): try limitsContainer.encode(value, forKey: AnyCodingKey(name))
            case .unlimited: try limitsContainer.encodeNil(forKey: AnyCodingKey(name))
            }
        }
        try c.encode(ads, forKey: .ads)
        try c.encode(entitlements, forKey: .entitlements)
        try c.encodeRFC3339(nextTransitionAt, forKey: .nextTransitionAt)
    }
}
