import Foundation

/// A meter's totals as a usage event carries them (`data.usage` of `usage.low`,
/// `usage.exhausted` and `usage.period_closed`; docs/USAGE.md "Events").
///
/// Every key is written, `null` where it does not apply: `available`, `rewards`, `credits` and
/// `threshold` describe the balance *now* (the threshold events); `revision` numbers the totals
/// of a closed period (1 when it closes, 2, 3, ... when usage reported late changes them).
public struct UsageSnapshot: Sendable, Hashable, Codable {
    public var meter: String
    /// The unit counted, for people (`minute`).
    public var unit: String
    public var periodStart: Date
    public var periodEnd: Date
    /// The period's allowance (`null` in JSON: unlimited).
    public var allowance: LimitValue
    public var used: Int
    public var fromAllowance: Int
    public var fromRewards: Int
    public var fromCredits: Int
    /// Units billed: used beyond allowance, rewards and credits, plus ``reclaimedUnits``.
    public var overageUnits: Int
    /// Units of packs that moved to another account after they were spent in this period
    /// (part of `overage_units`; docs/USAGE.md, "The balance").
    public var reclaimedUnits: Int
    /// `overage_units` × the meter's price, as a decimal string (`null` without a price).
    public var overageAmount: String?
    public var currency: String?
    /// Units that may still be spent now (open holds not taken off: holds are not the ledger).
    public var available: Int?
    /// Rewarded units left now.
    public var rewards: Int?
    /// Credited units left now; negative when refunds took back units already spent.
    public var credits: Int?
    /// `usage.low`: the number of units at or below which the meter is low.
    public var threshold: Int?
    /// `usage.period_closed`: 1 for the first totals of the period, then one more each time
    /// late usage changes them.
    public var revision: Int?

    /// The totals of `period` of `meter`.
    public init(period: UsageBalance.Period, meter: Meter, currency: String?) {
        self.meter = meter.id
        self.unit = meter.unit
        self.periodStart = period.start
        self.periodEnd = period.end
        self.allowance = period.allowance
        self.used = period.used
        self.fromAllowance = period.fromAllowance
        self.fromRewards = period.fromRewards
        self.fromCredits = period.fromCredits
        self.overageUnits = period.overage
        self.reclaimedUnits = period.reclaimed
        self.overageAmount = meter.overageAmount(units: period.overage)
        self.currency = currency
    }

    enum CodingKeys: String, CodingKey {
        case meter, unit, allowance, used, currency, available, rewards, credits, threshold, revision
        case periodStart = "period_start"
        case periodEnd = "period_end"
        case fromAllowance = "from_allowance"
        case fromRewards = "from_rewards"
        case fromCredits = "from_credits"
        case overageUnits = "overage_units"
        case reclaimedUnits = "reclaimed_units"
        case overageAmount = "overage_amount"
    }

    /// Decodes a snapshot; one written before `reclaimed_units` existed (sql/0042) reclaimed none.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        meter = try c.decode(String.self, forKey: .meter)
        unit = try c.decode(String.self, forKey: .unit)
        periodStart = try c.decode(Date.self, forKey: .periodStart)
        periodEnd = try c.decode(Date.self, forKey: .periodEnd)
        allowance = try c.decode(LimitValue.self, forKey: .allowance)
        used = try c.decode(Int.self, forKey: .used)
        fromAllowance = try c.decode(Int.self, forKey: .fromAllowance)
        fromRewards = try c.decode(Int.self, forKey: .fromRewards)
        fromCredits = try c.decode(Int.self, forKey: .fromCredits)
        overageUnits = try c.decode(Int.self, forKey: .overageUnits)
        reclaimedUnits = try c.decodeIfPresent(Int.self, forKey: .reclaimedUnits) ?? 0
        overageAmount = try c.decodeIfPresent(String.self, forKey: .overageAmount)
        currency = try c.decodeIfPresent(String.self, forKey: .currency)
        available = try c.decodeIfPresent(Int.self, forKey: .available)
        rewards = try c.decodeIfPresent(Int.self, forKey: .rewards)
        credits = try c.decodeIfPresent(Int.self, forKey: .credits)
        threshold = try c.decodeIfPresent(Int.self, forKey: .threshold)
        revision = try c.decodeIfPresent(Int.self, forKey: .revision)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(meter, forKey: .meter)
        try c.encode(unit, forKey: .unit)
        try c.encode(periodStart, forKey: .periodStart)
        try c.encode(periodEnd, forKey: .periodEnd)
        try c.encode(allowance, forKey: .allowance)
        try c.encode(used, forKey: .used)
        try c.encode(fromAllowance, forKey: .fromAllowance)
        try c.encode(fromRewards, forKey: .fromRewards)
        try c.encode(fromCredits, forKey: .fromCredits)
        try c.encode(overageUnits, forKey: .overageUnits)
        try c.encode(reclaimedUnits, forKey: .reclaimedUnits)
        try c.encode(overageAmount, forKey: .overageAmount)
        try c.encode(currency, forKey: .currency)
        try c.encode(available, forKey: .available)
        try c.encode(rewards, forKey: .rewards)
        try c.encode(credits, forKey: .credits)
        try c.encode(threshold, forKey: .threshold)
        try c.encode(revision, forKey: .revision)
    }
}

extension Meter {
    /// `units` of overage at the meter's price, as a decimal string; `nil` without a price.
    public func overageAmount(units: Int) -> String? {
        overagePrice.map { "\($0 * Decimal(units))" }
    }
}
