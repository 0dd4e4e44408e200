import Foundation
import PropertyBased
import SyncCore
import Testing
import TestSupport

/// The usage events' rule (docs/USAGE.md "Events"): thresholds fire once per crossing, closed
/// periods once per revision of their totals, and whatever order the entries arrive in, the
/// last totals announced for a period are its true totals.
@Suite struct UsageNoticesTests {
    let meter = Catalogue.default.meters[0]  // minutes: low at 10 %, 0.02 USD per minute of overage
    let january = UsagePeriod(start: utc(2026, 1, 1), end: utc(2026, 2, 1))

    func allowance(_ units: Int?, _ period: UsagePeriod, tier: String = "free") -> UsageEntry {
        UsageEntry(id: "allowance:minutes:\(period.start):\(tier)", meter: "minutes", kind: .allowance, units: units, at: period.start, periodEnd: period.end)
    }

    func usage(_ id: String, _ units: Int, _ at: Date) -> UsageEntry {
        UsageEntry(id: "usage:phone:\(id)", meter: "minutes", kind: .usage, units: units, at: at)
    }

    /// Evaluates at `now` and applies the marks, as the store does.
    func evaluate(_ entries: [UsageEntry], _ marks: inout [UsagePeriod: UsagePeriodMarks], now: Date) -> [UsageNotices.Notice] {
        let balance = UsageBalance.compute(meter: "minutes", entries: entries, now: now)
        let result = UsageNotices.evaluate(balance: balance, meter: meter, currency: "USD", marks: marks, now: now)
        for mark in result.marks { marks[mark.period] = mark }
        return result.notices
    }

    @Test("low and exhausted fire once per crossing, and a grant re-arms them")
    func thresholdsFireOncePerCrossing() {
        var marks: [UsagePeriod: UsagePeriodMarks] = [:]
        let now = utc(2026, 1, 20)
        var entries = [allowance(100, january), usage("a", 50, utc(2026, 1, 2))]
        #expect(evaluate(entries, &marks, now: now).isEmpty)
        // A row for the period exists now: it is what brings the sweeper back when it ends.
        #expect(marks[january]?.closedRevision == 0)

        entries.append(usage("b", 41, utc(2026, 1, 3)))  // 9 left: at most 10 % of 100
        let low = evaluate(entries, &marks, now: now)
        #expect(low.map(\.type) == [.usageLow])
        #expect(low.first?.usage.available == 9)
        #expect(low.first?.usage.threshold == 10)
        #expect(evaluate(entries, &marks, now: now).isEmpty)
        entries.append(usage("c", 5, utc(2026, 1, 4)))
        #expect(evaluate(entries, &marks, now: now).isEmpty, "still low: no second usage.low")

        entries.append(usage("d", 10, utc(2026, 1, 5)))  // 106 used of 100
        let exhausted = evaluate(entries, &marks, now: now)
        #expect(exhausted.map(\.type) == [.usageExhausted])
        #expect(exhausted.first?.usage.available == 0)
        #expect(exhausted.first?.usage.overageUnits == 6)
        #expect(exhausted.first?.usage.overageAmount == "0.12")
        #expect(evaluate(entries, &marks, now: now).isEmpty)

        // A pack of 100: 94 available again, above the threshold; both re-arm quietly.
        entries.append(UsageEntry(id: "credit:t1", meter: "minutes", kind: .credit, units: 100, at: utc(2026, 1, 6)))
        #expect(evaluate(entries, &marks, now: now).isEmpty)
        #expect(marks[january]?.low == false && marks[january]?.exhausted == false)
        // Spending it all crosses both thresholds in one step: low first, then exhausted.
        entries.append(usage("e", 200, utc(2026, 1, 7)))
        #expect(evaluate(entries, &marks, now: now).map(\.type) == [.usageLow, .usageExhausted])
    }

    @Test("a period with usage closes once with its totals, and again with the next revision when late usage changes them")
    func periodsCloseWithRevisions() {
        var marks: [UsagePeriod: UsagePeriodMarks] = [:]
        let february = UsagePeriod(start: utc(2026, 2, 1), end: utc(2026, 3, 1))
        var entries = [allowance(100, january), usage("a", 120, utc(2026, 1, 10)), allowance(100, february)]
        _ = evaluate(entries, &marks, now: utc(2026, 1, 20))
        let closed = evaluate(entries, &marks, now: utc(2026, 2, 1))
        #expect(closed.map(\.type) == [.usagePeriodClosed])
        let totals = try? #require(closed.first?.usage)
        #expect(totals?.periodStart == january.start && totals?.periodEnd == january.end)
        #expect(totals?.used == 120 && totals?.fromAllowance == 100 && totals?.overageUnits == 20)
        #expect(totals?.overageAmount == "0.4" && totals?.currency == "USD" && totals?.revision == 1)
        #expect(totals?.available == nil, "a closed period's totals say nothing about now")
        #expect(evaluate(entries, &marks, now: utc(2026, 2, 2)).isEmpty)

        // A tablet that was offline reports a January call in February.
        entries.append(usage("late", 15, utc(2026, 1, 30)))
        let revised = evaluate(entries, &marks, now: utc(2026, 2, 3))
        #expect(revised.map(\.type) == [.usagePeriodClosed])
        #expect(revised.first?.usage.revision == 2)
        #expect(revised.first?.usage.overageUnits == 35)
        // February had no usage: it closes quietly.
        #expect(evaluate(entries, &marks, now: utc(2026, 3, 2)).isEmpty)
        #expect(marks[february] == nil)
    }

    @Test("a period whose only bill is a spent pack that moved away is marked while open and announced when it closes")
    func reclaimedUnitsAreAnnouncedWithoutUsage() {
        // From an attacker review (docs/SECURITY.md): a pack spent in January and moved away in
        // February, when the account used nothing, billed February and nobody was told.
        let february = UsagePeriod(start: utc(2026, 2, 1), end: utc(2026, 3, 1))
        var marks: [UsagePeriod: UsagePeriodMarks] = [:]
        let entries = [
            allowance(100, january), allowance(100, february),
            UsageEntry(id: "credit:p", meter: "minutes", kind: .credit, units: 100, at: utc(2026, 1, 2)),
            usage("a", 200, utc(2026, 1, 3)),
            UsageEntry(id: "credit_transferred:p", meter: "minutes", kind: .creditRevoked, units: 100, at: utc(2026, 2, 10)),
        ]
        _ = evaluate(entries, &marks, now: utc(2026, 2, 11))
        // Marked while open, so the sweeper comes back to close it.
        #expect(marks[february] != nil)
        let closed = evaluate(entries, &marks, now: utc(2026, 3, 2)).filter { $0.type == .usagePeriodClosed }
        let announced = closed.first { $0.usage.periodStart == february.start }
        #expect(announced?.usage.used == 0)
        #expect(announced?.usage.overageUnits == 100 && announced?.usage.reclaimedUnits == 100, "\(closed)")
    }

    @Test("an unlimited allowance is never low or exhausted, but its periods still close")
    func unlimitedPeriodsClose() {
        var marks: [UsagePeriod: UsagePeriodMarks] = [:]
        let entries = [allowance(nil, january, tier: "premium"), usage("a", 5_000, utc(2026, 1, 10))]
        #expect(evaluate(entries, &marks, now: utc(2026, 1, 20)).isEmpty)
        #expect(marks[january] != nil)
        let closed = evaluate(entries, &marks, now: utc(2026, 2, 1))
        #expect(closed.map(\.type) == [.usagePeriodClosed])
        #expect(closed.first?.usage.allowance == .unlimited)
        #expect(closed.first?.usage.overageUnits == 0)
    }

    /// Entries arriving in any order and batching, evaluated as time moves forward: no
    /// evaluation repeats itself, revisions count up from 1, thresholds are true when they fire,
    /// and the last totals announced for every period with usage are the period's final totals.
    @Test func eventsConvergeWhateverTheArrivalOrder() async {
        await propertyCheck(count: 300, input: Gen.uint64().array(of: 1...50), Gen.uint64()) { specs, seed in
            var rng = SeededGenerator(seed: seed)
            let entries = specs.map(RandomLedger.entry).shuffled(using: &rng)
            var batches = [[UsageEntry]](repeating: [], count: Int.random(in: 1...6, using: &rng))
            for entry in entries { batches[Int.random(in: 0..<batches.count, using: &rng)].append(entry) }
            let times = (0..<batches.count).map { _ in utc(2025, 12, 20).addingTimeInterval(Double.random(in: 0...(110 * 86_400), using: &rng)) }.sorted()
            let end = utc(2026, 6, 1)

            var marks: [UsagePeriod: UsagePeriodMarks] = [:]
            var arrived: [UsageEntry] = []
            var lastClosed: [UsagePeriod: UsageSnapshot] = [:]
            for (batch, now) in zip(batches, times) + [([], end)] {
                arrived += batch
                for notice in evaluate(arrived, &marks, now: now) {
                    let period = UsagePeriod(start: notice.usage.periodStart, end: notice.usage.periodEnd)
                    switch notice.type {
                    case .usagePeriodClosed:
                        #expect(period.end <= now)
                        #expect(notice.usage.revision == (lastClosed[period]?.revision ?? 0) + 1)
                        lastClosed[period] = notice.usage
                    case .usageLow:
                        #expect((notice.usage.available ?? .max) <= (notice.usage.threshold ?? -1))
                    case .usageExhausted:
                        #expect(notice.usage.available == 0)
                    default:
                        Issue.record("unexpected \(notice.type)")
                    }
                }
                #expect(evaluate(arrived, &marks, now: now).isEmpty, "evaluating again must announce nothing")
            }
            let final = UsageBalance.compute(meter: "minutes", entries: entries, now: end)
            for period in final.periods where period.used > 0 {
                let announced = lastClosed[UsagePeriod(start: period.start, end: period.end)]
                #expect(announced.map { ($0.used, $0.fromAllowance, $0.fromRewards, $0.fromCredits, $0.overageUnits) }
                    ?? (-1, -1, -1, -1, -1) == (period.used, period.fromAllowance, period.fromRewards, period.fromCredits, period.overage))
            }
        }
    }
}
