/// A validated tier with everything it inherits from the tiers below it.
public struct Tier: Sendable, Equatable, Identifiable {
    public let id: String
    public let name: String
    /// 0 for the base (free) tier, increasing upwards.
    public let rank: Int
    /// Whether ads are shown.
    public let ads: Bool
    /// All features of this tier and every lower tier, sorted.
    public let features: [String]
    /// Every limit, inherited from lower tiers unless this tier sets it.
    public let limits: [String: LimitValue]
}
