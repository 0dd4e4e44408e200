/// A validated entitlement: what a purchase unlocks, mapped to a tier above the base tier.
public struct Entitlement: Sendable, Equatable, Identifiable {
    public let id: String
    public let name: String
    /// The tier unlocked while the entitlement is active.
    public let tierID: String
    /// The rank of ``tierID`` (higher is better).
    public let tierRank: Int
}
