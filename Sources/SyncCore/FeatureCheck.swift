/// The answer to "may this account use feature X?" (`GET /v1/accounts/{id}/features/{feature}`).
public struct FeatureCheck: Sendable, Equatable, Codable {
    /// The feature asked about.
    public let feature: String
    /// Whether the account's current tier includes the feature.
    public let allowed: Bool
    /// The lowest tier that includes the feature (what an upsell screen should offer).
    public let requiredTier: String
    /// The account's current tier.
    public let currentTier: String

    public init(feature: String, allowed: Bool, requiredTier: String, currentTier: String) {
        self.feature = feature
        self.allowed = allowed
        self.requiredTier = requiredTier
        self.currentTier = currentTier
    }

    enum CodingKeys: String, CodingKey {
        case feature, allowed
        case requiredTier = "required_tier"
        case currentTier = "current_tier"
    }
}

/// Why a feature check has no answer.
public enum FeatureCheckError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No tier of the catalogue has this feature (the HTTP layer answers 404).
    case unknownFeature(String)

    public var description: String {
        switch self {
        case .unknownFeature(let feature): "unknown feature '\(feature)'"
        }
    }
}
