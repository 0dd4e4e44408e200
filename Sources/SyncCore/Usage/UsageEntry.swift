import Foundation

/// One immutable entry of an account's ledger for one meter (DESIGN §7).
///
/// Every entry has an id given by its source, so the same fact reported twice (a retried
/// request, two devices relaying one purchase, two processes) is one entry:
///
/// | kind | id | units |
/// |---|---|---|
/// | `allowance` | `allowance:<meter>:<period start>:<tier>` | the tier's included units for `[at, period_end)`; `nil` = unlimited |
/// | `credit` | `credit:<transaction id>` | what a consumable purchase grants |
/// | `credit_revoked` | `credit_revoked:<transaction id>` (a later refund of it: `...#<µs>`) | the same units, taken back after a refund |
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
    static func idFormat(_ date: Date) -> String {
        date.formatted(idStyle)
    }

    private static let idStyle = Date.ISO8601FormatStyle(timeZone: .gmt)
}
