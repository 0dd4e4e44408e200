// Measures the resolver's hot path on one core: (a) joining reports into per-transaction
// aggregates, (b) resolving whole accounts (join + resolve). Run in release:
//   swift build -c release --product ResolverBenchmark && .build/release/ResolverBenchmark
import Foundation
import SyncCore

/// Deterministic RNG (SplitMix64) so every run measures the same accounts.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

let accountCount = 20_000
let rounds = 5
let catalogue = Catalogue.default
let base = Date(timeIntervalSince1970: 1_735_689_600)  // 2025-01-01T00:00:00Z
let now = base.addingTimeInterval(120 * 86_400)
let products = catalogue.document.products.map(\.id) + ["com.elsewhere.unknown"]

/// An account: 1–50 reports over 1–4 transactions from a few devices, with the usual mix of
/// renewals, stale reports, refunds, verified snapshots and the occasional non-renewing pass.
func makeAccount(_ account: Int, using rng: inout SeededGenerator) -> [Report] {
    let transactionCount = Int.random(in: 1...4, using: &rng)
    let transactions = (0..<transactionCount).map { index -> (id: String, product: String, purchased: Date) in
        let product = products[Int.random(in: 0..<products.count, using: &rng)]
        let purchased = base.addingTimeInterval(Double(index * 30 + Int.random(in: 0...5, using: &rng)) * 86_400)
        return ("\(200_000_000 + account * 10 + index)", product, purchased)
    }
    return (0..<Int.random(in: 1...50, using: &rng)).map { _ in
        let transaction = transactions[Int.random(in: 0..<transactionCount, using: &rng)]
        let verified = Int.random(in: 0..<4, using: &rng) == 0
        let observed = transaction.purchased.addingTimeInterval(Double(Int.random(in: 0...90, using: &rng)) * 86_400)
        return Report(
            reportID: UUID(uuid: (
                UInt8.random(in: 0...255, using: &rng), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13,
                UInt8.random(in: 0...255, using: &rng), UInt8.random(in: 0...255, using: &rng))).uuidString,
            deviceID: "device-\(Int.random(in: 0..<3, using: &rng))",
            observedAt: observed,
            productID: transaction.product,
            originalTransactionID: transaction.id,
            transactionID: transaction.id,
            purchasedAt: transaction.purchased,
            expiresAt: transaction.purchased.addingTimeInterval(Double(Int.random(in: 28...31, using: &rng)) * 86_400),
            gracePeriodExpiresAt: Int.random(in: 0..<10, using: &rng) == 0
                ? transaction.purchased.addingTimeInterval(40 * 86_400) : nil,
            revokedAt: Int.random(in: 0..<20, using: &rng) == 0 ? observed : nil,
            isUpgraded: Int.random(in: 0..<25, using: &rng) == 0,
            willAutoRenew: Bool.random(using: &rng),
            inBillingRetry: Int.random(in: 0..<10, using: &rng) == 0,
            environment: .production,
            trust: verified ? .verified(signedDate: observed) : .unverifiedDevice)
    }
}

var rng = SeededGenerator(state: 20_250_101)
let accounts = (0..<accountCount).map { makeAccount($0, using: &rng) }
let reportCount = accounts.reduce(0) { $0 + $1.count }
print("accounts: \(accountCount), reports: \(reportCount) (avg \(String(format: "%.1f", Double(reportCount) / Double(accountCount))) per account), rounds: \(rounds)")

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
}

/// Runs `body` `rounds` times and returns the fastest round's seconds (least disturbed by the
/// other process sharing the machine).
func fastest(_ body: () -> Int) -> (seconds: Double, checksum: Int) {
    var best = Double.infinity
    var checksum = 0
    let clock = ContinuousClock()
    for _ in 0..<rounds {
        var result = 0
        let elapsed = clock.measure { result = body() }
        best = min(best, seconds(elapsed))
        checksum &+= result
    }
    return (best, checksum)
}

// (a) Report joins: fold every account's reports into its per-transaction aggregates.
let joins = fastest {
    var transactions = 0
    for reports in accounts {
        var ledger = TransactionLedger()
        for report in reports { ledger.add(report) }
        transactions &+= ledger.count
    }
    return transactions
}

// (a') The bare join of a report into an existing aggregate (no grouping).
let bareJoins = fastest {
    var revoked = 0
    for reports in accounts {
        var aggregate = TransactionAggregate(reports[0])
        for report in reports { aggregate.join(report) }
        revoked &+= aggregate.isRevoked ? 1 : 0
    }
    return revoked
}

// (b) Account resolutions: join all of an account's reports, then resolve at `now`.
let resolutions = fastest {
    var active = 0
    for reports in accounts {
        var ledger = TransactionLedger()
        for report in reports { ledger.add(report) }
        let state = Resolver.resolve(ledger: ledger, catalogue: catalogue, now: now)
        active &+= state.entitlements.count + state.features.count
    }
    return active
}

// (b') Resolve only, from aggregates already joined (what a worker does for a stored account).
let ledgers = accounts.map { reports -> [TransactionAggregate] in TransactionAggregate.aggregate(reports) }
let resolveOnly = fastest {
    var active = 0
    for aggregates in ledgers {
        active &+= Resolver.resolve(transactions: aggregates, catalogue: catalogue, now: now).entitlements.count
    }
    return active
}

// Baseline, same data, same run: group every account's reports by transaction id in a plain
// Dictionary. It is the least any join must do, so the ratio below says how much the join
// costs beyond bookkeeping, whatever the machine's speed today.
let baseline = fastest {
    var groups = 0
    for reports in accounts {
        var byTransaction: [String: Int] = [:]
        for report in reports { byTransaction[report.transactionID, default: 0] += 1 }
        groups &+= byTransaction.count
    }
    return groups
}

func rate(_ count: Int, _ seconds: Double) -> String {
    String(format: "%.0f", Double(count) / seconds)
}

print("joins/s: \(rate(reportCount, joins.seconds))  (ledger: grouped by transaction id; target >= 1000000)")
print("bare joins/s: \(rate(reportCount, bareJoins.seconds))  (into one aggregate)")
print("resolutions/s: \(rate(accountCount, resolutions.seconds))  (join all reports + resolve; target >= 100000)")
print("resolve-only/s: \(rate(accountCount, resolveOnly.seconds))  (from stored aggregates)")
print("baseline grouping/s: \(rate(reportCount, baseline.seconds))  (Dictionary grouping of the same reports)")
print("joins / baseline: \(String(format: "%.2f", baseline.seconds / joins.seconds))")
print("checksum: \(baseline.checksum &+ joins.checksum &+ bareJoins.checksum &+ resolutions.checksum &+ resolveOnly.checksum)")
