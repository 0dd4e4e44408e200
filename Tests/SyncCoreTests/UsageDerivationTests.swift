import Foundation
import PropertyBased
import SyncCore
import Testing
import TestSupport

/// A minute pack's refunds and their reversals (`UsageDerivation.creditCorrections`): whatever
/// order the reports arrive in and however they are grouped into resolutions, the ledger's units
/// for the pack net to what the purchase is at every step: 100 while it stands, 0 while it is
/// refunded.
@Suite struct UsageDerivationTests {
    static let purchased = utc(2026, 1, 2)

    /// The pack's purchase, verified (only verified consumables grant).
    static func purchase(_ id: String) -> Report {
        Report(
            reportID: id, deviceID: "phone", observedAt: purchased, productID: "voip.credits.100", originalTransactionID: "pack1",
            transactionID: "pack1", purchasedAt: purchased, trust: .verified(signedDate: purchased))
    }

    /// Refund number `n` (odd `n`) or its reversal (even `n`), each a day after the one before:
    /// the App Store's REFUND and REFUND_REVERSED.
    static func turn(_ n: Int) -> Report {
        let at = purchased.addingTimeInterval(Double(n) * 86_400)
        return Report(
            reportID: "turn-\(n)", deviceID: "store", observedAt: at, productID: "voip.credits.100", originalTransactionID: "pack1",
            transactionID: "pack1", purchasedAt: purchased, revokedAt: n % 2 == 1 ? at : nil, trust: .verified(signedDate: at, source: .store))
    }

    /// The pack's units in `stored` (credit − refunds + reversals).
    static func net(_ stored: [UsageEntry]) -> Int {
        stored.reduce(0) { total, entry in
            switch entry.kind {
            case .credit, .creditRestored: total + (entry.units ?? 0)
            case .creditRevoked: total - (entry.units ?? 0)
            default: total
            }
        }
    }

    /// One resolution, as the engine does it: the entries that follow from the transactions,
    /// plus the corrections the stored refund entries call for; stored unless already there.
    static func resolve(
        _ reports: [Report], into stored: inout [UsageEntry], arrived: Set<String> = [], now: Date = utc(2026, 6, 1)
    ) -> TransactionAggregate? {
        let aggregates = TransactionAggregate.aggregate(reports)
        var ids: [String: Set<String>] = [:]
        for entry in stored { ids[entry.meter, default: []].insert(entry.id) }
        let new = UsageDerivation.entries(transactions: aggregates, catalogue: .default)
            + UsageDerivation.creditCorrections(transactions: aggregates, catalogue: .default, stored: ids, arrived: arrived, now: now)
        for entry in new where entry.kind != .allowance && !(ids[entry.meter]?.contains(entry.id) ?? false) {
            stored.append(entry)
            ids[entry.meter, default: []].insert(entry.id)
        }
        return aggregates.first
    }

    @Test func refundsAndReversalsNetToThePurchasesStateInAnyOrderAndGrouping() async {
        // Up to 6 turns (refund, reversal, refund, ...), the purchase reported twice, all shuffled
        // and cut into resolutions at random points.
        await propertyCheck(count: 500, input: Gen.int(in: 0...6), Gen.uint64()) { turns, seed in
            var rng = SeededGenerator(seed: seed)
            let reports = ([Self.purchase("p1"), Self.purchase("p2")] + (0..<turns).map { Self.turn($0 + 1) }).shuffled(using: &rng)
            var stored: [UsageEntry] = []
            var seen: [Report] = []
            var index = 0
            while index < reports.count {
                let size = Int.random(in: 1...(reports.count - index), using: &rng)
                seen += reports[index..<(index + size)]
                index += size
                guard let aggregate = Self.resolve(seen, into: &stored) else { continue }
                // The invariant after every resolution: the units say what the purchase is now.
                #expect(Self.net(stored) == (aggregate.isRevoked ? 0 : 100), "\(stored.map(\.id)) revoked: \(aggregate.isRevoked)")
            }
            // The last turn decides: an odd number of turns ends refunded.
            #expect(Self.net(stored) == (turns % 2 == 1 ? 0 : 100))
            // Resolving again adds nothing, and no id was written twice.
            let before = stored
            _ = Self.resolve(seen, into: &stored)
            #expect(stored == before)
            #expect(Set(stored.map(\.id)).count == stored.count)
            // Refund entries lost (what reconcile repairs): resolving again nets the same.
            var damaged = stored.filter { $0.kind == .credit || Bool.random(using: &rng) }
            _ = Self.resolve(seen, into: &damaged)
            #expect(Self.net(damaged) == Self.net(stored), "\(stored.map(\.id)) then \(damaged.map(\.id))")
            #expect(Set(damaged.map(\.id)).count == damaged.count)
            // The balance agrees: the credits are the net.
            let balance = UsageBalance.compute(meter: "minutes", entries: stored, now: utc(2026, 6, 1))
            #expect(balance.credits == Self.net(stored))
        }
    }

    /// The old account's debit when the purchase moves (as `TransactionBinder` writes it): what
    /// its entries still give, under an id of its own for each move away.
    static func transferAway(_ stored: inout [UsageEntry], at: Date) {
        let net = Self.net(stored)
        guard net > 0 else { return }
        let away = stored.filter { $0.id.hasPrefix("credit_transferred:") }.count
        stored.append(UsageEntry(
            id: "credit_transferred:pack1" + (away == 0 ? "" : "#\(away)"), meter: "minutes", kind: .creditRevoked, units: net, at: at))
    }

    @Test func aPackThatMovesBetweenAccountsIsInExactlyOneOfThemWhateverHappensToIt() async {
        // Steps: 0 a refund or its reversal (the next turn), 1 the purchase moves to the other
        // account; its reports move with it, and the account that has it is resolved.
        await propertyCheck(count: 400, input: Gen.int(in: 0...1).array(of: 0...10)) { steps in
            var ledgers: [[UsageEntry]] = [[], []]
            var holder = 0
            var reports = [Self.purchase("p1")]
            var turns = 0
            var aggregate = Self.resolve(reports, into: &ledgers[holder])
            for (index, step) in steps.enumerated() {
                // Each step a day after the last turn could be (turns are a day apart from the purchase).
                let now = Self.purchased.addingTimeInterval(Double(20 + index) * 86_400)
                if step == 0 {
                    turns += 1
                    reports.append(Self.turn(turns))
                } else {
                    Self.transferAway(&ledgers[holder], at: now)
                    holder = 1 - holder
                }
                let before = ledgers[holder]
                aggregate = Self.resolve(reports, into: &ledgers[holder], arrived: step == 1 ? ["pack1"] : [], now: now)
                if step == 1 {
                    // Arriving, a pack brings nothing dated before it came to an account that
                    // had it (no refund or reversal it did not see there): a credit now, or nothing.
                    let added = ledgers[holder].dropFirst(before.count)
                    #expect(!added.contains { $0.kind == .creditRestored }, "\(steps.prefix(index + 1)): \(added.map(\.id))")
                    if !before.isEmpty {
                        #expect(added.allSatisfy { $0.kind == .credit && $0.at == now }, "\(steps.prefix(index + 1)): \(added.map(\.id))")
                    }
                }
                let expected = aggregate?.isRevoked == true ? 0 : 100
                #expect(Self.net(ledgers[holder]) == expected, "holder \(holder) after \(steps.prefix(index + 1)): \(ledgers[holder].map(\.id))")
                #expect(Self.net(ledgers[1 - holder]) == 0, "the other account after \(steps.prefix(index + 1)): \(ledgers[1 - holder].map(\.id))")
            }
            for ledger in ledgers { #expect(Set(ledger.map(\.id)).count == ledger.count) }
        }
    }

    @Test func aReversedRefundGivesThePackBackAndASecondRefundTakesItAgain() {
        var stored: [UsageEntry] = []
        var reports = [Self.purchase("p1")]
        _ = Self.resolve(reports, into: &stored)
        reports.append(Self.turn(1))
        _ = Self.resolve(reports, into: &stored)
        reports.append(Self.turn(2))
        _ = Self.resolve(reports, into: &stored)
        reports.append(Self.turn(3))
        _ = Self.resolve(reports, into: &stored)
        let micros = { (n: Int) in Int64(Self.purchased.addingTimeInterval(Double(n) * 86_400).timeIntervalSince1970 * 1_000_000) }
        #expect(stored.map(\.id) == ["credit:pack1", "credit_revoked:pack1", "credit_restored:pack1#\(micros(2))", "credit_revoked:pack1#\(micros(3))"])
        #expect(stored.map(\.kind) == [.credit, .creditRevoked, .creditRestored, .creditRevoked])
        #expect(stored[2].at == Self.purchased.addingTimeInterval(2 * 86_400), "the units come back at the reversal's time")
        #expect(stored.map { UsageDerivation.transactionID(ofCreditEntry: $0.id) } == ["pack1", "pack1", "pack1", "pack1"])
        #expect(UsageDerivation.transactionID(ofCreditEntry: "credit_transferred:2000000123") == "2000000123")
        #expect(UsageDerivation.transactionID(ofCreditEntry: "credit:a#b") == "a#b", "only a suffix of digits is a refund turn's")
    }

    @Test func withoutARefundInTheReportsNothingIsGivenBack() {
        // The refund's report was pruned; a later report of the purchase is still there. The
        // stored refund stands: there is no refund in the aggregate for a reversal to reverse.
        let stored = ["minutes": Set(["credit:pack1", "credit_revoked:pack1"])]
        let aggregates = TransactionAggregate.aggregate([Self.purchase("p1"), Self.turn(2)])
        #expect(aggregates.first?.isRevoked == false)
        #expect(UsageDerivation.creditCorrections(transactions: aggregates, catalogue: .default, stored: stored, now: utc(2026, 6, 1)).isEmpty)
    }

    @Test func anUnverifiedReversalGivesNothingBack() {
        var stored: [UsageEntry] = []
        var reversal = Self.turn(2)
        reversal.trust = .unverifiedDevice
        _ = Self.resolve([Self.purchase("p1"), Self.turn(1)], into: &stored)
        _ = Self.resolve([Self.purchase("p1"), Self.turn(1), reversal], into: &stored)
        #expect(Self.net(stored) == 0)
        #expect(stored.map(\.kind) == [.credit, .creditRevoked])
    }
}
