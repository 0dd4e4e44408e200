import Foundation

/// A meter's totals for one allowance period, as `usage.low`, `usage.exhausted` and
/// `usage.period_closed` carry them (`data.usage`).
///
/// `available`, `rewards`, `credits` and `threshold` describe the balance at the time of the
/// event (the threshold events); `revision` numbers the totals of a closed period. Each is `nil`
/// where it does not apply.
public struct WebhookUsage: Sendable, Hashable, Codable {
    /// The meter's id (such as `minutes`).
    public var meter: String
    /// The unit counted, for people (such as `minute`).
    public var unit: String
    /// Start of the allowance period.
    public var periodStart: Date
    /// End of the allowance period.
    public var periodEnd: Date
    /// The period's allowance (`null` in JSON: unlimited).
    public var allowance: WebhookLimit
    /// Units used in the period.
    public var used: Int
    /// Units of ``used`` taken from the allowance.
    public var fromAllowance: Int
    /// Units of ``used`` taken from rewarded units.
    public var fromRewards: Int
    /// Units of ``used`` taken from credits.
    public var fromCredits: Int
    /// Units billed: those used beyond allowance, rewards and credits, plus ``reclaimedUnits``.
    public var overageUnits: Int
    /// Units of minute packs that moved to another account after they were spent in this period:
    /// part of ``overageUnits`` (0 from a service that does not send it).
    public var reclaimedUnits: Int
    /// ``overageUnits`` times the meter's price, as a decimal string; `nil` without a price.
    public var overageAmount: String?
    /// The currency of ``overageAmount``.
    public var currency: String?
    /// Units that may still be spent.
    public var available: Int?
    /// Rewarded units left.
    public var rewards: Int?
    /// Credited units left (negative when refunds took back units already spent).
    public var credits: Int?
    /// `usage.low`: the number of units at or below which the meter is low.
    public var threshold: Int?
    /// `usage.period_closed`: 1 for the period's first totals, then one more each time late usage
    /// changes them. Keep the highest revision per (`meter`, `periodStart`, `periodEnd`).
    public var revision: Int?

    /// A usage snapshot with the given fields.
    public init(
        meter: String, unit: String, periodStart: Date, periodEnd: Date, allowance: WebhookLimit, used: Int,
        fromAllowance: Int, fromRewards: Int, fromCredits: Int, overageUnits: Int, overageAmount: String?,
        currency: String?, available: Int? = nil, rewards: Int? = nil, credits: Int? = nil,
        threshold: Int? = nil, revision: Int? = nil, reclaimedUnits: Int = 0
    ) {
        self.reclaimedUnits = reclaimedUnits
        self.meter = meter
        self.unit = unit
        self.periodStart = periodStart
        self.periodEnd = periodEnd
        self.allowance = allowance
        self.used = used
        self.fromAllowance = fromAllowance
        self.fromRewards = fromRewards
        self.fromCredits = fromCredits
        self.overageUnits = overageUnits
        self.overageAmount = overageAmount
        self.currency = currency
        self.available = available
        self.rewards = rewards
        self.credits = credits
        self.threshold = threshold
        self.revision = revision
    }

    /// The JSON keys.
    public enum CodingKeys: String, CodingKey {
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

    /// Decodes `data.usage`; dates are RFC 3339 with or without fractional seconds.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        meter = try c.decode(String.self, forKey: .meter)
        unit = try c.decode(String.self, forKey: .unit)
        periodStart = try c.decodeRFC3339(forKey: .periodStart)
        periodEnd = try c.decodeRFC3339(forKey: .periodEnd)
        if let value = try c.decodeIfPresent(Int.self, forKey: .allowance) {
            allowance = .limited(value)
        } else {
            allowance = .unlimited
        }
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

    /// Encodes every key, `null` where a value is absent; dates as RFC 3339.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(meter, forKey: .meter)
        try c.encode(unit, forKey: .unit)
        try c.encodeRFC3339(periodStart, forKey: .periodStart)
        try c.encodeRFC3339(periodEnd, forKey: .periodEnd)
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
