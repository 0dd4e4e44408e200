import Foundation

/// A validated meter of the catalogue: something counted per account (call minutes), with an
/// allowance per tier and period, an optional overage price and thresholds.
public struct Meter: Sendable, Equatable, Identifiable {
    public let id: String
    public let name: String
    /// The unit counted, for people (`minute`).
    public let unit: String
    /// The length of an allowance period (`P1M` unless the catalogue says otherwise).
    public let period: ISODuration
    /// The allowance per period by tier rank (inherited upwards; never lower than the tier below).
    public let allowanceByTierRank: [LimitValue]
    /// Price of one unit of overage in the catalogue's currency.
    public let overagePrice: Decimal?
    /// `usage.low` fires when what may still be spent (allowance left, rewards, credits) falls to
    /// this fraction of the period's allowance (``UsageNotices``).
    public let lowFraction: Double?
    /// The most units rewarded ads may grant an account in a UTC day (nil: rewards are refused).
    public let rewardsPerDay: Int?

    /// The allowance of the tier at `rank` (the base tier's when out of range).
    public func allowance(tierRank rank: Int) -> LimitValue {
        allowanceByTierRank.indices.contains(rank) ? allowanceByTierRank[rank] : allowanceByTierRank[0]
    }
}

/// Bounds on units anywhere in the ledger: one entry, one grant, one allowance.
public enum UsageUnits {
    /// The largest number of units one entry may carry (about 1,900 years of minutes).
    public static let maximum = 1_000_000_000
}
