import Foundation
import PropertyBased
import SyncCore
import Testing
import TestSupport

/// Properties of the per-transaction join and of resolution over random report sets.
@Suite struct JoinPropertyTests {
    let specs = Gen.uint64().array(of: 1...30)
    let productIndices = Gen.int(in: 0...(RandomReports.productPool.count - 1)).array(of: RandomReports.transactionCount)
    let seeds = Gen.uint64()

    @Test func permutationDuplicationAndBatchingDoNotChangeTheResult() async {
        await propertyCheck(count: 300, input: specs, productIndices, seeds) { specs, indices, seed in
            let products = RandomReports.products(indices)
            let reports = RandomReports.reports(specs, products: products)
            let reference = TransactionAggregate.aggregate(reports)
            var rng = SeededGenerator(seed: seed)

            // Any permutation.
            let shuffled = reports.shuffled(using: &rng)
            #expect(TransactionAggregate.aggregate(shuffled) == reference)

            // Duplicates (a retried sync call, or two devices relaying the same report).
            let duplicated = (shuffled + shuffled.filter { _ in Bool.random(using: &rng) }).shuffled(using: &rng)
            #expect(TransactionAggregate.aggregate(duplicated) == reference)

            // Batching: fold random batches into partial ledgers, then join the partial ledgers
            // in a random order, as workers persisting per-batch aggregates would.
            let batchCount = Int.random(in: 1...4, using: &rng)
            var batches = [TransactionLedger](repeating: TransactionLedger(), count: batchCount)
            for report in duplicated { batches[Int.random(in: 0..<batchCount, using: &rng)].add(report) }
            var merged = TransactionLedger()
            for batch in batches.shuffled(using: &rng) { merged.merge(batch) }
            #expect(merged.aggregates == reference)
            let viaMerge = TransactionAggregate.merge(
                batches[0].unorderedAggregates, batches.dropFirst().flatMap(\.unorderedAggregates))
            #expect(viaMerge == reference)

            // The resolved state agrees at every probe time, whatever the aggregate order.
            for now in RandomReports.probeTimes {
                let expected = Resolver.resolve(transactions: reference, catalogue: .default, now: now)
                let fromShuffledAggregates = Resolver.resolve(
                    transactions: reference.shuffled(using: &rng), catalogue: .default, now: now)
                #expect(fromShuffledAggregates == expected)
                #expect(Resolver.resolve(reports: duplicated, catalogue: .default, now: now) == expected)
                #expect(Resolver.resolve(ledger: merged, catalogue: .default, now: now) == expected)
            }
        }
    }

    @Test func joinIsCommutativeAssociativeAndIdempotent() async {
        await propertyCheck(count: 300, input: specs, productIndices, seeds) { specs, indices, seed in
            // Put every report on one transaction so the three aggregates are joinable.
            let products = RandomReports.products(indices)
            let reports = RandomReports.reports(specs, products: products).map { report -> Report in
                var report = report
                report.transactionID = "t0"
                return report
            }
            var rng = SeededGenerator(seed: seed)
            var parts: [[Report]] = [[], [], []]
            for report in reports { parts[Int.random(in: 0..<3, using: &rng)].append(report) }
            // Each part needs at least one report to form an aggregate.
            for index in parts.indices where parts[index].isEmpty { parts[index] = [reports[index % reports.count]] }
            let a = fold(parts[0])
            let b = fold(parts[1])
            let c = fold(parts[2])

            #expect(a.joined(with: b) == b.joined(with: a))
            #expect(a.joined(with: b).joined(with: c) == a.joined(with: b.joined(with: c)))
            #expect(a.joined(with: a) == a)
            // Joining a report equals joining its singleton aggregate.
            for report in parts[1] {
                var viaReport = a
                viaReport.join(report)
                #expect(viaReport == a.joined(with: TransactionAggregate(report)))
            }
            // The fold of everything is the join of the parts.
            #expect(fold(parts[0] + parts[1] + parts[2]) == a.joined(with: b).joined(with: c))
        }
    }

    @Test func unverifiedReportsCannotUnrevoke() async {
        await propertyCheck(count: 300, input: specs, productIndices, Gen.uint64().array(of: 1...20)) {
            specs, indices, extraSpecs in
            let products = RandomReports.products(indices)
            let reports = RandomReports.reports(specs, products: products)
            let before = TransactionAggregate.aggregate(reports)
            // Late reports from devices whose signature did not verify, whatever they claim,
            // including a signed_date far in the future.
            let late = RandomReports.reports(extraSpecs, products: products).map { report -> Report in
                var report = report
                report.revokedAt = nil
                report.trust = ReportTrust(
                    source: report.trust.source == .store ? .store : .device, isVerified: false,
                    signedDate: utc(2099, 1, 1))
                return report
            }
            let after = TransactionAggregate.aggregate(reports + late)
            for aggregate in before where aggregate.isRevoked {
                let later = after.first { $0.transactionID == aggregate.transactionID }
                #expect(later?.isRevoked == true, "transaction \(aggregate.transactionID) was un-revoked")
            }
            // And at the entitlement level: a revoked entitlement stays revoked or is granted by
            // another transaction, but never by the revoked one.
            for now in RandomReports.probeTimes {
                let state = Resolver.resolve(transactions: after, catalogue: .default, now: now)
                for entitlement in state.entitlements where entitlement.isActive {
                    let source = after.first { $0.transactionID == entitlement.sourceTransactionID }
                    #expect(source?.isRevoked == false)
                    #expect(source?.isUpgraded == false)
                }
            }
        }
    }

    @Test func onlyAnOperatorLiftsAnOperatorRevocation() async {
        await propertyCheck(count: 300, input: specs, productIndices, Gen.uint64().array(of: 1...20)) {
            specs, indices, extraSpecs in
            let products = RandomReports.products(indices)
            let reports = RandomReports.reports(specs, products: products)
            let before = TransactionAggregate.aggregate(reports)
            // Late reports of the store and of devices, verified or not, signed up to 2099 and
            // revoking nothing: what a user re-syncing a fresh JWS, or the store re-signing the
            // transaction, sends after an operator's revoke.
            let late = RandomReports.reports(extraSpecs, products: products).map { report -> Report in
                var report = report
                report.revokedAt = nil
                let signed = utc(2099, 1, 1)
                switch report.trust.source {
                case .admin, .store: report.trust = .verified(signedDate: signed, source: .store)
                case .device: report.trust = ReportTrust(source: .device, isVerified: report.trust.isVerified, signedDate: signed)
                }
                return report
            }
            let after = TransactionAggregate.aggregate(reports + late)
            for aggregate in before where aggregate.isRevokedByOperator {
                let later = after.first { $0.transactionID == aggregate.transactionID }
                #expect(later?.isRevokedByOperator == true, "transaction \(aggregate.transactionID): the store lifted the operator's revocation")
                #expect(later?.isRevoked == true)
            }
            for now in RandomReports.probeTimes {
                let state = Resolver.resolve(transactions: after, catalogue: .default, now: now)
                for entitlement in state.entitlements where entitlement.isActive {
                    let source = after.first { $0.transactionID == entitlement.sourceTransactionID }
                    #expect(source?.isRevokedByOperator == false)
                }
            }
            // An operator's unrevoke later than every revocation lifts them all, in any order.
            let unrevokes = reports.map { report -> Report in
                var unrevoke = report
                unrevoke.reportID = "unrevoke-\(report.reportID)"
                unrevoke.revokedAt = nil
                unrevoke.trust = .admin(.unrevoke, at: utc(2099, 6, 1))
                return unrevoke
            }
            let lifted = TransactionAggregate.aggregate((reports + late + unrevokes).reversed())
            #expect(lifted.allSatisfy { !$0.isRevoked })
        }
    }

    @Test func addingReportsNeverMovesAnExpiryEarlier() async {
        await propertyCheck(count: 300, input: specs, productIndices) { specs, indices in
            let products = RandomReports.products(indices)
            var ledger = TransactionLedger()
            for report in RandomReports.reports(specs, products: products) {
                let before = ledger[report.transactionID]
                ledger.add(report)
                guard let after = ledger[report.transactionID] else {
                    Issue.record("report \(report.reportID) was not aggregated")
                    continue
                }
                #expect(after.expiresAt.map { $0 >= (report.expiresAt ?? $0) } ?? (report.expiresAt == nil))
                guard let before else { continue }
                #expect(isNotEarlier(after.expiresAt, than: before.expiresAt))
                #expect(isNotEarlier(after.gracePeriodExpiresAt, than: before.gracePeriodExpiresAt))
                #expect(isNotEarlier(after.latestRevokedAt, than: before.latestRevokedAt))
                #expect(isNotEarlier(after.latestReinstatedAt, than: before.latestReinstatedAt))
                #expect(!before.isUpgraded || after.isUpgraded)
                #expect(after.representative >= before.representative)
            }
        }
    }

    @Test func verifiedReportsAreAuthoritativeForDescriptiveFields() async {
        await propertyCheck(count: 200, input: specs, productIndices) { specs, indices in
            let reports = RandomReports.reports(specs, products: RandomReports.products(indices))
            for aggregate in TransactionAggregate.aggregate(reports) {
                let own = reports.filter { $0.transactionID == aggregate.transactionID }
                // The representative is the greatest report by the documented order key.
                guard let greatest = own.max(by: { ReportOrderKey($0) < ReportOrderKey($1) }) else { continue }
                #expect(aggregate.representative == ReportOrderKey(greatest))
                #expect(aggregate.willAutoRenew == greatest.willAutoRenew)
                #expect(aggregate.inBillingRetry == greatest.inBillingRetry)
                #expect(aggregate.environment == greatest.environment)
                if own.contains(where: { $0.trust.isVerified }) {
                    #expect(aggregate.representative.isVerified)
                }
                // Last-expiry-wins, straight from the definition.
                #expect(aggregate.expiresAt == own.compactMap(\.expiresAt).max())
                #expect(aggregate.isUpgraded == own.contains { $0.isUpgraded })
            }
        }
    }

    private func fold(_ reports: [Report]) -> TransactionAggregate {
        var aggregate = TransactionAggregate(reports[0])
        for report in reports.dropFirst() { aggregate.join(report) }
        return aggregate
    }

    private func isNotEarlier(_ after: Date?, than before: Date?) -> Bool {
        guard let before else { return true }
        guard let after else { return false }
        return after >= before
    }
}

/// The random report sets really exercise the interesting cases (otherwise the properties above
/// would pass vacuously).
@Suite struct RandomReportCoverageTests {
    @Test func generatedSetsCoverRevocationsReversalsUpgradesAndEveryStatus() {
        var rng = SeededGenerator(seed: 42)
        var revoked = 0
        var reinstated = 0
        var upgraded = 0
        var operatorHeld = 0
        var operatorLiftedStore = 0
        var statuses = Set<EntitlementStatus>()
        var tiers = Set<String>()
        for _ in 0..<400 {
            let products = RandomReports.products((0..<5).map { _ in Int.random(in: 0..<100, using: &rng) })
            let specs = (0..<Int.random(in: 1...30, using: &rng)).map { _ in rng.next() }
            let aggregates = TransactionAggregate.aggregate(RandomReports.reports(specs, products: products))
            revoked += aggregates.filter(\.isRevoked).count
            reinstated += aggregates.filter { $0.latestRevokedAt != nil && !$0.isRevoked }.count
            // The shape of the attack: the store signed a reinstatement after the operator's
            // revoke, which stands; and an operator's unrevoke lifting the store's revocation.
            operatorHeld += aggregates.filter { aggregate in
                guard let revocation = aggregate.operatorRevocation, let store = aggregate.storeReinstatedAt else { return false }
                return aggregate.isRevokedByOperator && store > revocation.revokedAt
            }.count
            operatorLiftedStore += aggregates.filter { $0.storeSaysRevoked && !$0.isRevokedByStore }.count
            upgraded += aggregates.filter(\.isUpgraded).count
            for now in RandomReports.probeTimes {
                let state = Resolver.resolve(transactions: aggregates, catalogue: .default, now: now)
                statuses.formUnion(state.entitlements.map(\.status))
                tiers.insert(state.tier)
            }
        }
        #expect(revoked > 50)
        #expect(reinstated > 20)
        #expect(upgraded > 50)
        #expect(operatorHeld > 10)
        #expect(operatorLiftedStore > 10)
        #expect(statuses == Set(EntitlementStatus.allCases))
        #expect(tiers == Set(Catalogue.default.tiers.map(\.id)))
    }
}
