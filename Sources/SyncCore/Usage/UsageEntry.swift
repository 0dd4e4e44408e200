import Foundation

/// One immutable entry of an account's ledger for one meter (docs/USAGE.md, "Ledger entries").
///
/// Every entry has an id given by its source, so the same fact reported twice (a retried
/// request, two devices relaying one purchase, two processes) is one entry:
///
/// | kind | id | units |
/// |---|---|---|
/// | `allowance` | `allowance:<meter>:<period start>:<tier>` | the tier's included units for `[at, period_end)`; `nil` = unlimited |
/// | `credit` | `credit:<transaction id>` | what a consumable purchase grants |
/// | `credit_revoked` | `credit_revoked:<transaction id>` (a later refund of it: `...#<µs>`) | the same units, taken back after a refund |
/// | `credit_revoked` | `credit_transferred:<transaction id>` (a later move away: `...#<µs>`) | the same units, gone with the pack to another account |
/// | `credit_restored` | `credit_restored:<transaction id>#<µs>` | the same units, given back when a refund is reversed |
/// | `reward` | `reward:<ad network>:<transaction id>` | what a verified rewarded ad grants |
/// | `usage` | `usage:<device id>:<usage id>` | units consumed at `at` (a call's minutes) |
/// | `adjustment` | `adjustment:<operator id>` | an operator's grant (positive) or debit (negative) |
public struct UsageEntry: Sendable, Hashable, Codable {
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        case allowance, credit
        case creditRevoked = "credit_revoked"
        case creditRestored = "credit_restored"
        case reward, usage, adjustment
    }

    /// The id prefix of a pack's units leaving with it for another account (binding policy
    /// `transfer`), a `credit_revoked` entry the balance tells apart (``UsageSums/transfers``).
    public static let transferPrefix = "credit_transferred:"

    public var id: String
    public var meter: String
    public var kind: Kind
    /// Units (see the table above); `nil` only for an unlimited allowance.
    public var units: Int?
    /// When it happened: a usage's time, a grant's time, an allowance period's start.
    public var at: Date
    /// The end of an allowance's period (exclusive); `nil` for every other kind.
    public var periodEnd: Date?

    public init(id: String, meter: String, kind: Kind, units: Int?, at: Date, periodEnd: Date? = nil) {
        self.id = id
        self.meter = meter
        self.kind = kind
        self.units = units
        self.at = at
        self.periodEnd = periodEnd
    }

    /// An allowance of `units` (`.unlimited` or a count) for `period`.
    public static func allowance(meter: String, tier: String, units: LimitValue, period: UsagePeriod) -> UsageEntry {
        let amount: Int? = switch units {
        case .limited(let value): value
        case .unlimited: nil
        }
        return UsageEntry(
            id: "allowance:\(meter):\(UsagePeriod.idFormat(period.start)):\(tier)", meter: meter, kind: .allowance,
            units: amount, at: period.start, periodEnd: period.end)
    }

    /// A deterministic total order, used to pick one of two different entries that claim the
    /// same id, so the balance stays a function of the set even then.
    static func precedes(_ lhs: UsageEntry, _ rhs: UsageEntry) -> Bool {
        (lhs.kind.rawValue, lhs.units ?? Int.max, lhs.at, lhs.periodEnd ?? .distantPast, lhs.meter)
            < (rhs.kind.rawValue, rhs.units ?? Int.max, rhs.at, rhs.periodEnd ?? .distantPast, rhs.meter)
    }

    enum CodingKeys: String, CodingKey {
        case id, meter, kind, units, at
        case periodEnd = "period_end"
    }
}

/// An allowance period: `[start, end)`.
public struct UsagePeriod: Sendable, Hashable, Codable, Comparable {
    public var start: Date
    public var end: Date

    public init(start: Date, end: Date) {
        self.start = start
        self.end = end
    }

    public func contains(_ date: Date) -> Bool { start <= date && date < end }

    public static func < (lhs: UsagePeriod, rhs: UsagePeriod) -> Bool {
        (lhs.start, lhs.end) < (rhs.start, rhs.end)
    }

    /// The period of `length` that contains `date`, counting from `anchor` in whole steps
    /// (`anchor + k × length`, each step computed from the anchor so month ends do not drift:
    /// anchored on 31 January, periods start on 31 January, 28/29 February, 31 March, ...).
    public static func containing(_ date: Date, anchor: Date, length: ISODuration) -> UsagePeriod {
        let approximate = Double(length.months) * 30.436_875 * 86_400 + Double(length.days) * 86_400
        let estimate = (date.timeIntervalSince(anchor) / approximate).rounded(.down)
        var step = estimate.isFinite && estimate.magnitude < 1e7 ? Int(estimate) : 0
        // The estimate is off by at most a step or two; the bound only guards absurd dates.
        var guardSteps = 64
        while guardSteps > 0, length.advance(anchor, times: step) > date {
            step -= 1
            guardSteps -= 1
        }
        while guardSteps > 0, length.advance(anchor, times: step + 1) <= date {
            step += 1
            guardSteps -= 1
        }
        return UsagePeriod(start: length.advance(anchor, times: step), end: length.advance(anchor, times: step + 1))
    }

    /// `1970-01-01T00:00:00Z`: the anchor of calendar periods (with `P1M`, calendar months in UTC).
    public static let calendarAnchor = Date(timeIntervalSince1970: 0)

    /// A period start as it appears in allowance ids: RFC 3339 in UTC, whole seconds.
    /// (with microseconds when the start is not a whole second: a period cut at a purchase).
    static func idFormat(_ date: Date) -> String {
        let seconds = date.timeIntervalSince1970
        guard seconds != seconds.rounded(.down) else { return date.formatted(idStyle) }
        return date.formatted(fractionalIDStyle)
    }

    private static let idStyle = Date.ISO8601FormatStyle(timeZone: .gmt)
    private static let fractionalIDStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt)
}

/// What the balance needs of a meter's recorded entries over a span of time (a period): their
/// sums by the part each plays (docs/USAGE.md, "The balance"). The store keeps these per period
/// (`usage_totals`), so a balance costs the same however many entries an account has.
public struct UsageSums: Sendable, Hashable, Codable {
    /// Units used (usage entries).
    public var used: Int
    /// Units rewarded.
    public var rewards: Int
    /// Units credited: packs, refunds reversed, positive adjustments.
    public var credits: Int
    /// Units taken back from the credit pool after the period's usage: refunds and negative
    /// adjustments (positive here).
    public var debits: Int
    /// Units of packs that moved to another account (`credit_transferred:`, binding policy
    /// `transfer`): taken from the credit pool after the debits, and what the pool no longer has
    /// (units of the pack spent here) is billed as overage (docs/USAGE.md, "The balance").
    public var transfers: Int
    /// Recorded entries counted (every kind but allowances).
    public var entries: Int

    public init(used: Int = 0, rewards: Int = 0, credits: Int = 0, debits: Int = 0, transfers: Int = 0, entries: Int = 0) {
        self.used = used
        self.rewards = rewards
        self.credits = credits
        self.debits = debits
        self.transfers = transfers
        self.entries = entries
    }

    /// These sums with the transfers counted among the debits, as period totals made final before
    /// transfers were told apart hold them (sql/0042).
    public var transfersAsDebits: UsageSums {
        UsageSums(used: used, rewards: rewards, credits: credits, debits: debits + transfers, transfers: 0, entries: entries)
    }

    /// Adds one recorded entry (an allowance adds nothing).
    public mutating func add(_ entry: UsageEntry) {
        let units = entry.units ?? 0
        switch entry.kind {
        case .allowance: return
        case .usage: used += max(0, units)
        case .reward: rewards += max(0, units)
        case .credit, .creditRestored: credits += max(0, units)
        case .adjustment:
            if units >= 0 { credits += units } else { debits += -units }
        case .creditRevoked:
            if entry.id.hasPrefix(UsageEntry.transferPrefix) { transfers += abs(units) } else { debits += abs(units) }
        }
        entries += 1
    }

    public static func + (lhs: UsageSums, rhs: UsageSums) -> UsageSums {
        UsageSums(
            used: lhs.used + rhs.used, rewards: lhs.rewards + rhs.rewards, credits: lhs.credits + rhs.credits,
            debits: lhs.debits + rhs.debits, transfers: lhs.transfers + rhs.transfers, entries: lhs.entries + rhs.entries)
    }
}
