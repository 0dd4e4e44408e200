import Foundation
import PropertyBased
import SyncCore
import Testing
import TestSupport

/// Random but meaningful ledgers of one meter: three monthly periods (two of them overlapping, as
/// when a subscription takes over from a calendar month), upgrades (a second allowance entry for
/// a period), usage from several devices including times outside every period, credits, refunds,
/// refunds reversed, packs moved to another account, rewards and operator adjustments. Ids come from small pools so duplicates happen often.
enum RandomLedger {
    static let base = utc(2026, 1, 1)
    static let periods: [UsagePeriod] = [
        UsagePeriod(start: utc(2026, 1, 1), end: utc(2026, 2, 1)),
        UsagePeriod(start: utc(2026, 1, 14), end: utc(2026, 2, 14)),
        UsagePeriod(start: utc(2026, 2, 14), end: utc(2026, 3, 14)),
    ]
    static let probeTimes: [Date] = [utc(2025, 12, 20), utc(2026, 1, 10), utc(2026, 1, 20), utc(2026, 2, 20), utc(2026, 4, 1)]

    /// The entry named by the low bits of `spec`: every field follows from the id, so equal ids
    /// are the same fact (a duplicate); different facts under one id are tested on their own.
    static func entry(_ spec: UInt64) -> UsageEntry {
        let key = spec % 4_096
        func bits(_ shift: UInt64, _ modulus: UInt64) -> Int { Int(((key &* 0x9E37_79B9) >> shift) % modulus) }
        let at = base.addingTimeInterval(Double(bits(4, 90) - 10) * 86_400 + Double(bits(12, 24)) * 3_600)
        switch key % 10 {
        case 0, 1:
            let index = bits(3, 3)
            let period = periods[index]
            let units: Int? = bits(7, 5) == 0 ? nil : [0, 100, 1_000][bits(9, 3)]
            return UsageEntry(id: "allowance:minutes:\(index):\(units.map(String.init) ?? "null")", meter: "minutes",
                              kind: .allowance, units: units, at: period.start, periodEnd: period.end)
        case 2:
            return UsageEntry(id: "credit:t\(key / 10 % 4)", meter: "minutes", kind: .credit, units: 100, at: utc(2026, 1, 3 + Int(key / 10 % 4) * 9))
        case 3:
            return UsageEntry(id: "credit_revoked:t\(key / 10 % 4)", meter: "minutes", kind: .creditRevoked, units: 100,
                              at: utc(2026, 1, 8 + Int(key / 10 % 4) * 9))
        case 6:
            // A refund of the pack reversed: its units back, after the refund.
            return UsageEntry(id: "credit_restored:t\(key / 10 % 4)#\(key / 40 % 2)", meter: "minutes", kind: .creditRestored, units: 100,
                              at: utc(2026, 1, 9 + Int(key / 10 % 4) * 9 + Int(key / 40 % 2) * 3))
        case 7:
            // The pack moved to another account (binding policy transfer), after it came.
            return UsageEntry(id: "credit_transferred:t\(key / 10 % 4)", meter: "minutes", kind: .creditRevoked, units: 100,
                              at: utc(2026, 1, 10 + Int(key / 10 % 4) * 9))
        case 4:
            return UsageEntry(id: "reward:admob:\(key / 10)", meter: "minutes", kind: .reward, units: 5 + bits(5, 10), at: at)
        case 5:
            return UsageEntry(id: "adjustment:\(key / 10)", meter: "minutes", kind: .adjustment, units: bits(6, 100) - 40, at: at)
        default:
            return UsageEntry(id: "usage:device\(key % 3):\(key)", meter: "minutes", kind: .usage, units: 1 + bits(8, 120), at: at)
        }
    }
}

@Suite struct UsageBalanceTests {
    let specs = Gen.uint64().array(of: 0...60)
    let seeds = Gen.uint64()

    func balances(_ entries: [UsageEntry]) -> [UsageBalance] {
        RandomLedger.probeTimes.map { UsageBalance.compute(meter: "minutes", entries: entries, now: $0) }
    }

    @Test func permutationDuplicationAndBatchingDoNotChangeTheBalance() async {
        await propertyCheck(count: 400, input: specs, seeds) { specs, seed in
            let entries = specs.map(RandomLedger.entry)
            let reference = balances(entries)
            var rng = SeededGenerator(seed: seed)
            #expect(balances(entries.shuffled(using: &rng)) == reference)
            let duplicated = (entries + entries.filter { _ in Bool.random(using: &rng) }).shuffled(using: &rng)
            #expect(balances(duplicated) == reference)
            // Batches from several devices and processes, stored in any interleaving.
            var batches = [[UsageEntry]](repeating: [], count: Int.random(in: 1...4, using: &rng))
            for entry in duplicated { batches[Int.random(in: 0..<batches.count, using: &rng)].append(entry) }
            #expect(balances(batches.shuffled(using: &rng).flatMap { $0 }) == reference)
            // Entries of another meter change nothing.
            let other = entries.map { entry -> UsageEntry in
                var entry = entry
                entry.meter = "sms"
                return entry
            }
            #expect(balances((entries + other).shuffled(using: &rng)) == reference)
        }
    }

    /// The store's way (sums of the recorded entries per period of a timeline, kept in
    /// `usage_totals`, plus the entries before and after every period summed on the spot) gives
    /// the balance that ``UsageBalance/compute(meter:entries:now:)`` gives from every entry, on
    /// random partitions of time and random ledgers.
    @Test func periodTotalsGiveWhatEveryEntryGives() async {
        await propertyCheck(count: 400, input: specs, Gen.uint64()) { specs, seed in
            var rng = SeededGenerator(seed: seed)
            // A timeline: periods end to end, cut at random instants, with random allowances.
            var bounds = [RandomLedger.base.addingTimeInterval(Double(Int.random(in: -20...5, using: &rng)) * 86_400)]
            for _ in 0..<Int.random(in: 1...5, using: &rng) {
                bounds.append(bounds[bounds.count - 1].addingTimeInterval(Double(Int.random(in: 1...40, using: &rng)) * 86_400 + Double(Int.random(in: 0...86_399, using: &rng))))
            }
            let timeline = zip(bounds, bounds.dropFirst()).map { start, end in
                let units = [0, 100, 1_000, nil].randomElement(using: &rng) ?? 0
                return (period: UsagePeriod(start: start, end: end), units: units, allowance: units.map { LimitValue.limited($0) } ?? .unlimited)
            }
            let recorded = specs.map(RandomLedger.entry).filter { $0.kind != .allowance }
            let allowances = timeline.enumerated().map { index, period in
                UsageEntry(id: "allowance:minutes:\(index)", meter: "minutes", kind: .allowance, units: period.units,
                           at: period.period.start, periodEnd: period.period.end)
            }
            var unique: [String: UsageEntry] = [:]
            for entry in recorded { unique[entry.id] = entry }
            for now in RandomLedger.probeTimes + [bounds[bounds.count - 1].addingTimeInterval(-1)] {
                let reference = UsageBalance.compute(meter: "minutes", entries: recorded + allowances, now: now)
                // As the store sums them: by span of time.
                let first = timeline[0].period.start
                let last = timeline[timeline.count - 1].period.end
                func sums(_ contains: (Date) -> Bool) -> UsageSums {
                    var sums = UsageSums()
                    for entry in unique.values where contains(entry.at) { sums.add(entry) }
                    return sums
                }
                let periods = timeline.map { period in
                    UsageBalance.PeriodSums(period: period.period, allowance: period.allowance, sums: sums(period.period.contains))
                }
                let settled = UsageBalance.settle(
                    meter: "minutes", timeline: periods, before: sums { $0 < first }, after: sums { $0 >= last }, now: now)
                #expect(settled == reference, "seed \(seed) at \(now)")
            }
        }
    }

    @Test func everyUnitUsedIsAccountedForAndNoPoolIsOverspent() async {
        await propertyCheck(count: 400, input: specs) { specs in
            let entries = specs.map(RandomLedger.entry)
            let balance = UsageBalance.compute(meter: "minutes", entries: entries, now: utc(2026, 4, 1))
            var unique: [String: UsageEntry] = [:]
            for entry in entries { unique[entry.id] = entry }
            let used = unique.values.filter { $0.kind == .usage }.reduce(0) { $0 + ($1.units ?? 0) }
            let rewarded = unique.values.filter { $0.kind == .reward }.reduce(0) { $0 + ($1.units ?? 0) }
            let periods = balance.periods + (balance.unallocated.map { [$0] } ?? [])
            #expect(periods.reduce(0) { $0 + $1.used } == used)
            for period in periods {
                #expect(period.used + period.reclaimed == period.fromAllowance + period.fromRewards + period.fromCredits + period.overage)
                #expect(min(period.fromAllowance, period.fromRewards, period.fromCredits, period.overage, period.reclaimed) >= 0)
                #expect(period.reclaimed <= period.overage)
                #expect(LimitValue.limited(period.fromAllowance) <= period.allowance)
                // Rewards and credits are only spent once the allowance is gone.
                if period.fromRewards + period.fromCredits > 0 { #expect(period.allowanceLeft == 0) }
                if period.fromCredits > 0 || period.overage > period.reclaimed { #expect(period.allowanceLeft ?? 1 == 0) }
            }
            #expect(balance.rewards >= 0)
            #expect(balance.rewards + periods.reduce(0) { $0 + $1.fromRewards } == rewarded)
        }
    }

    @Test func moreUsageNeverLeavesMoreAvailableAndMoreCreditNeverMoreOverage() async {
        await propertyCheck(count: 300, input: specs, Gen.int(in: 1...500)) { specs, units in
            let entries = specs.map(RandomLedger.entry)
            for now in RandomLedger.probeTimes {
                let before = UsageBalance.compute(meter: "minutes", entries: entries, now: now)
                let used = UsageBalance.compute(
                    meter: "minutes", entries: entries + [UsageEntry(id: "usage:extra", meter: "minutes", kind: .usage, units: units, at: now)],
                    now: now)
                if let available = before.available, let after = used.available { #expect(after <= available) }
                let credited = UsageBalance.compute(
                    meter: "minutes", entries: entries + [UsageEntry(id: "credit:extra", meter: "minutes", kind: .credit, units: units, at: now)],
                    now: now)
                #expect(zip(credited.periods, before.periods).allSatisfy { $0.overage <= $1.overage })
            }
        }
    }

    /// A pack that comes and moves on to another account mints nothing. Against
    /// the same ledger without it, the account's overage less its credits is the same (what was
    /// spent of the pack is billed, what was not goes with it), and a move that nothing follows
    /// leaves the credit pool in no more debt than it would be in without the pack.
    @Test func aPackThatMovesAwayMintsNothing() async {
        await propertyCheck(count: 400, input: specs, Gen.int(in: -15...80), Gen.int(in: 0...60)) { specs, arrival, stay in
            let entries = specs.map(RandomLedger.entry)
            let bought = RandomLedger.base.addingTimeInterval(Double(arrival) * 86_400)
            let pack = UsageEntry(id: "credit:moving", meter: "minutes", kind: .credit, units: 100, at: bought)
            let moved = UsageEntry(
                id: "credit_transferred:moving", meter: "minutes", kind: .creditRevoked, units: 100,
                at: bought.addingTimeInterval(Double(stay) * 86_400 + 3_600))
            for now in RandomLedger.probeTimes {
                let without = UsageBalance.compute(meter: "minutes", entries: entries, now: now)
                let with = UsageBalance.compute(meter: "minutes", entries: entries + [pack, moved], now: now)
                func billed(_ balance: UsageBalance) -> Int {
                    (balance.periods + (balance.unallocated.map { [$0] } ?? [])).reduce(0) { $0 + $1.overage }
                }
                #expect(billed(with) - with.credits == billed(without) - without.credits, "at \(now)")
                // When nothing follows the move, it leaves no debt the account would not have
                // had anyway. (A later refund can: the pool is one, so credits that covered the
                // moved pack's spent units are gone when their own pack is refunded.)
                let last = entries.map(\.at).max() ?? bought
                let movedLast = UsageEntry(
                    id: "credit_transferred:moving", meter: "minutes", kind: .creditRevoked, units: 100,
                    at: max(moved.at, last.addingTimeInterval(1)))
                let withLast = UsageBalance.compute(meter: "minutes", entries: entries + [pack, movedLast], now: now)
                #expect(withLast.credits >= min(without.credits, 0), "at \(now): \(withLast.credits) against \(without.credits)")
                #expect(billed(withLast) - withLast.credits == billed(without) - without.credits, "at \(now)")
            }
        }
    }

    @Test func aSpentPackThatMovesIsBilledWhereItWasSpent() {
        let allowance = UsageEntry(id: "a", meter: "minutes", kind: .allowance, units: 100, at: utc(2026, 1, 1), periodEnd: utc(2026, 2, 1))
        let pack = UsageEntry(id: "credit:p", meter: "minutes", kind: .credit, units: 100, at: utc(2026, 1, 2))
        let calls = UsageEntry(id: "usage:phone:1", meter: "minutes", kind: .usage, units: 170, at: utc(2026, 1, 3))
        let moved = UsageEntry(id: "credit_transferred:p", meter: "minutes", kind: .creditRevoked, units: 100, at: utc(2026, 1, 4))
        let balance = UsageBalance.compute(meter: "minutes", entries: [allowance, pack, calls, moved], now: utc(2026, 1, 5))
        // 100 from the allowance, 70 from the pack; the pack leaves: its 30 unspent go with it, its
        // 70 spent are billed here. A refund of the same pack leaves a debt instead.
        #expect(balance.current?.fromCredits == 70)
        #expect(balance.current?.reclaimed == 70)
        #expect(balance.current?.overage == 70)
        #expect(balance.credits == 0)
        let refund = UsageEntry(id: "credit_revoked:p", meter: "minutes", kind: .creditRevoked, units: 100, at: utc(2026, 1, 4))
        let refunded = UsageBalance.compute(meter: "minutes", entries: [allowance, pack, calls, refund], now: utc(2026, 1, 5))
        #expect(refunded.current?.overage == 0)
        #expect(refunded.credits == -70)
    }

    @Test func twoDifferentEntriesClaimingOneIDGiveTheSameBalanceInEitherOrder() {
        let a = UsageEntry(id: "usage:phone:c1", meter: "minutes", kind: .usage, units: 10, at: utc(2026, 1, 5))
        let b = UsageEntry(id: "usage:phone:c1", meter: "minutes", kind: .usage, units: 12, at: utc(2026, 1, 5))
        let allowance = UsageEntry(id: "a", meter: "minutes", kind: .allowance, units: 100, at: utc(2026, 1, 1), periodEnd: utc(2026, 2, 1))
        let ab = UsageBalance.compute(meter: "minutes", entries: [allowance, a, b], now: utc(2026, 1, 6))
        let ba = UsageBalance.compute(meter: "minutes", entries: [b, allowance, a], now: utc(2026, 1, 6))
        #expect(ab == ba)
        #expect(ab.current?.used == 12)
    }

    /// A month of calls from a phone, a tablet and the web; the tablet is offline for five days
    /// and reports its calls afterwards, some of them twice. Basic tier (1,000 minutes), a minute
    /// pack bought mid-month, two rewarded ads.
    @Test func aMonthAcrossThreeDevicesEndsWithTheExactBalanceAndOverage() throws {
        let period = UsagePeriod(start: utc(2026, 3, 14), end: utc(2026, 4, 14))
        var entries: [UsageEntry] = [.allowance(meter: "minutes", tier: "basic", units: .limited(1_000), period: period)]
        var expectedUse = 0
        for day in 0..<31 {
            let date = adding(.day, day, to: period.start)
            for (device, minutes) in [("phone", 20), ("web", 7)] {
                entries.append(UsageEntry(id: "usage:\(device):\(day)", meter: "minutes", kind: .usage, units: minutes, at: date))
                expectedUse += minutes
            }
            if day % 2 == 0 {
                entries.append(UsageEntry(id: "usage:tablet:\(day)", meter: "minutes", kind: .usage, units: 15, at: date))
                expectedUse += 15
            }
        }
        // The tablet's offline days (10–14) arrive late and partly twice: nothing changes.
        let offline = entries.filter { $0.id.hasPrefix("usage:tablet:1") }
        entries.append(UsageEntry(id: "credit:pack1", meter: "minutes", kind: .credit, units: 100, at: utc(2026, 3, 30)))
        entries.append(UsageEntry(id: "reward:admob:r1", meter: "minutes", kind: .reward, units: 10, at: utc(2026, 3, 20)))
        entries.append(UsageEntry(id: "reward:admob:r2", meter: "minutes", kind: .reward, units: 10, at: utc(2026, 3, 21)))
        let balance = UsageBalance.compute(meter: "minutes", entries: entries + offline + offline, now: utc(2026, 4, 13, 23))
        // 31 × 27 + 16 × 15 = 1,077 minutes: 1,000 from the allowance, 20 from rewards, 57 from the pack.
        #expect(expectedUse == 1_077)
        let current = try #require(balance.current)
        #expect(current.used == 1_077)
        #expect(current.fromAllowance == 1_000)
        #expect(current.fromRewards == 20)
        #expect(current.fromCredits == 57)
        #expect(current.overage == 0)
        #expect(balance.credits == 43)
        #expect(balance.available == 43)

        // The same month without the pack ends 57 minutes over.
        let withoutPack = UsageBalance.compute(meter: "minutes", entries: entries.filter { $0.kind != .credit }, now: utc(2026, 4, 13))
        #expect(withoutPack.current?.overage == 57)
        #expect(withoutPack.available == 0)
    }

    @Test func aRefundedPackIsDebitedEvenWhenSpent() {
        let period = UsagePeriod(start: utc(2026, 1, 1), end: utc(2026, 2, 1))
        let entries: [UsageEntry] = [
            .allowance(meter: "minutes", tier: "free", units: .limited(100), period: period),
            UsageEntry(id: "credit:t1", meter: "minutes", kind: .credit, units: 100, at: utc(2026, 1, 2)),
            UsageEntry(id: "usage:phone:1", meter: "minutes", kind: .usage, units: 180, at: utc(2026, 1, 3)),
            UsageEntry(id: "credit_revoked:t1", meter: "minutes", kind: .creditRevoked, units: 100, at: utc(2026, 1, 10)),
        ]
        let balance = UsageBalance.compute(meter: "minutes", entries: entries, now: utc(2026, 1, 11))
        #expect(balance.current?.fromCredits == 80)
        #expect(balance.credits == -80)
        #expect(balance.available == 0)
        // A new pack repays the debt first.
        let repaid = UsageBalance.compute(
            meter: "minutes",
            entries: entries + [UsageEntry(id: "credit:t2", meter: "minutes", kind: .credit, units: 100, at: utc(2026, 1, 12))],
            now: utc(2026, 1, 13))
        #expect(repaid.credits == 20)
        #expect(repaid.available == 20)
    }

    @Test func anUpgradeMidPeriodGivesTheNewAllowanceAndUnlimitedCoversEverything() {
        let period = UsagePeriod(start: utc(2026, 1, 14), end: utc(2026, 2, 14))
        let basic = UsageEntry.allowance(meter: "minutes", tier: "basic", units: .limited(1_000), period: period)
        let use = UsageEntry(id: "usage:web:1", meter: "minutes", kind: .usage, units: 1_400, at: utc(2026, 1, 20))
        #expect(UsageBalance.compute(meter: "minutes", entries: [basic, use], now: utc(2026, 1, 21)).current?.overage == 400)
        let premium = UsageEntry.allowance(meter: "minutes", tier: "premium", units: .unlimited, period: period)
        #expect(basic.id != premium.id)
        let upgraded = UsageBalance.compute(meter: "minutes", entries: [premium, use, basic], now: utc(2026, 1, 21))
        #expect(upgraded.current?.overage == 0)
        #expect(upgraded.current?.allowance == .unlimited)
        #expect(upgraded.available == nil)
    }

    @Test func usageBelongsToThePeriodThatStartedLast() {
        let free = UsagePeriod(start: utc(2026, 1, 1), end: utc(2026, 2, 1))
        let basic = UsagePeriod(start: utc(2026, 1, 14), end: utc(2026, 2, 14))
        let entries: [UsageEntry] = [
            .allowance(meter: "minutes", tier: "free", units: .limited(100), period: free),
            .allowance(meter: "minutes", tier: "basic", units: .limited(1_000), period: basic),
            UsageEntry(id: "u1", meter: "minutes", kind: .usage, units: 30, at: utc(2026, 1, 5)),
            UsageEntry(id: "u2", meter: "minutes", kind: .usage, units: 50, at: utc(2026, 1, 20)),
            UsageEntry(id: "u3", meter: "minutes", kind: .usage, units: 5, at: utc(2026, 2, 3)),
            UsageEntry(id: "u0", meter: "minutes", kind: .usage, units: 7, at: utc(2025, 12, 3)),
        ]
        let balance = UsageBalance.compute(meter: "minutes", entries: entries, now: utc(2026, 2, 5))
        #expect(balance.periods.map(\.used) == [30, 55])
        #expect(balance.current?.start == basic.start)
        #expect(balance.available == 945)
        #expect(balance.unallocated?.overage == 7)
    }

    @Test func periodsStepFromTheAnchorWithoutDrift() {
        let month = ISODuration("P1M")
        let anchor = utc(2026, 1, 31, 10)
        let march = UsagePeriod.containing(utc(2026, 3, 15), anchor: anchor, length: month ?? ISODuration("P1D")!)
        #expect(march.start == utc(2026, 2, 28, 10))
        #expect(march.end == utc(2026, 3, 31, 10))
        let calendar = UsagePeriod.containing(utc(2026, 11, 23, 17), anchor: UsagePeriod.calendarAnchor, length: month ?? ISODuration("P1D")!)
        #expect(calendar == UsagePeriod(start: utc(2026, 11, 1), end: utc(2026, 12, 1)))
        let exact = UsagePeriod.containing(utc(2026, 3, 14), anchor: utc(2026, 1, 14), length: month ?? ISODuration("P1D")!)
        #expect(exact.start == utc(2026, 3, 14))
    }
}

/// Which allowance entry the resolved state gives.
@Suite struct UsageAllowanceTests {
    func allowance(_ reports: [Report], at now: Date) -> UsageEntry? {
        guard let meter = Catalogue.default.meters.first else { return nil }
        let (period, tier, units) = UsageAllowances.period(of: meter, for: resolve(reports, at: now), catalogue: .default, at: now)
        return .allowance(meter: meter.id, tier: tier, units: units, period: period)
    }

    @Test func aMonthlySubscriptionResetsOnItsRenewalDay() {
        let reports = [
            report("r1", transaction: "t1", original: "o1", product: ProductID.basicMonthly, purchased: utc(2026, 1, 14, 9),
                   expires: utc(2026, 2, 14, 9), observed: utc(2026, 1, 14, 9)),
            report("r2", transaction: "t2", original: "o1", product: ProductID.basicMonthly, purchased: utc(2026, 2, 14, 9),
                   expires: utc(2026, 3, 14, 9), observed: utc(2026, 2, 14, 9)),
        ]
        let january = allowance(reports, at: utc(2026, 2, 1))
        #expect(january?.at == utc(2026, 1, 14, 9))
        #expect(january?.periodEnd == utc(2026, 2, 14, 9))
        #expect(january?.units == 1_000)
        let february = allowance(reports, at: utc(2026, 3, 1))
        #expect(february?.at == utc(2026, 2, 14, 9))
        #expect(february?.id == "allowance:minutes:2026-02-14T09:00:00Z:basic")
    }

    @Test func aYearlySubscriptionHasMonthlyPeriodsFromItsPurchaseDay() {
        let reports = [report("r1", transaction: "t1", product: ProductID.basicYearly, purchased: utc(2026, 1, 20),
                              expires: utc(2027, 1, 20), observed: utc(2026, 1, 20))]
        let entry = allowance(reports, at: utc(2026, 6, 25))
        #expect(entry?.at == utc(2026, 6, 20))
        #expect(entry?.periodEnd == utc(2026, 7, 20))
    }

    @Test func theFreeTierUsesCalendarMonthsStartingWhenPaidAccessEnded() {
        #expect(allowance([], at: utc(2026, 11, 23))?.at == utc(2026, 11, 1))
        #expect(allowance([], at: utc(2026, 11, 23))?.units == 100)
        let lapsed = [report("r1", transaction: "t1", product: ProductID.basicMonthly, purchased: utc(2026, 10, 10),
                             expires: utc(2026, 11, 10), autoRenew: false, observed: utc(2026, 10, 10))]
        let entry = allowance(lapsed, at: utc(2026, 11, 23))
        #expect(entry?.id == "allowance:minutes:2026-11-10T00:00:00Z:free")
        #expect(entry?.periodEnd == utc(2026, 12, 1))
    }

    @Test func premiumAndLifetimeAreUnlimited() {
        let lifetime = [report("r1", transaction: "t1", product: ProductID.premiumLifetime, purchased: utc(2026, 11, 5),
                               observed: utc(2026, 11, 5))]
        let entry = allowance(lifetime, at: utc(2026, 11, 23))
        #expect(entry?.units == nil)
        #expect(entry?.at == utc(2026, 11, 5))
        #expect(entry?.periodEnd == utc(2026, 12, 1))
    }
}
