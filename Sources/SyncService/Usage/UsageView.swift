import Foundation
import SyncCore

/// A meter's balance as the API shows it (`usage` in account reads and usage answers).
struct UsageView: Encodable {
    var meter: String
    var unit: String
    var periodStart: Date?
    var periodEnd: Date?
    /// `null`: unlimited.
    var allowance: LimitValue
    var used: Int
    var rewards: Int
    /// Negative when refunds took back units that were already spent.
    var credits: Int
    var creditsNegative: Bool
    /// Units that may be spent now, open holds taken off; `null`: unlimited.
    var available: Int?
    /// Units held by open holds (reserved by devices for calls in progress).
    var held: Int
    /// Units of the current period billed: used beyond allowance, rewards and credits, plus
    /// `reclaimed_units`.
    var overageUnits: Int
    /// Units of packs that moved to another account after they were spent in the current period.
    var reclaimedUnits: Int
    /// `overage_units` × the meter's `overage_price` (`null` without a price), as a decimal string.
    var overageAmount: String?
    var currency: String?

    init(_ balance: UsageBalance, meter: Meter, currency: String?, held: Int) {
        let current = balance.current
        self.meter = balance.meter
        self.unit = meter.unit
        self.periodStart = current?.start
        self.periodEnd = current?.end
        self.allowance = current?.allowance ?? .limited(0)
        self.used = current?.used ?? 0
        self.rewards = balance.rewards
        self.credits = balance.credits
        self.creditsNegative = balance.credits < 0
        self.available = balance.available.map { max(0, $0 - held) }
        self.held = held
        self.overageUnits = current?.overage ?? 0
        self.reclaimedUnits = current?.reclaimed ?? 0
        self.overageAmount = meter.overageAmount(units: current?.overage ?? 0)
        self.currency = currency
    }

    enum CodingKeys: String, CodingKey {
        case meter, unit, allowance, used, rewards, credits, available, held, currency
        case periodStart = "period_start"
        case periodEnd = "period_end"
        case creditsNegative = "credits_negative"
        case overageUnits = "overage_units"
        case reclaimedUnits = "reclaimed_units"
        case overageAmount = "overage_amount"
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(meter, forKey: .meter)
        try c.encode(unit, forKey: .unit)
        try c.encode(periodStart, forKey: .periodStart)
        try c.encode(periodEnd, forKey: .periodEnd)
        try c.encode(allowance, forKey: .allowance)
        try c.encode(used, forKey: .used)
        try c.encode(rewards, forKey: .rewards)
        try c.encode(credits, forKey: .credits)
        try c.encode(creditsNegative, forKey: .creditsNegative)
        try c.encode(available, forKey: .available)
        try c.encode(held, forKey: .held)
        try c.encode(overageUnits, forKey: .overageUnits)
        try c.encode(reclaimedUnits, forKey: .reclaimedUnits)
        try c.encode(overageAmount, forKey: .overageAmount)
        try c.encode(currency, forKey: .currency)
    }
}
