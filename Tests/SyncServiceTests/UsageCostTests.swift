import Foundation
import Hummingbird
import HummingbirdTesting
import Postgres
import SyncCore
import SyncService
@testable import SyncStore
import TestSupport
import Testing

/// What a usage request reads does not grow with the account's ledger (docs/USAGE.md "Cost": the
/// same cost at 100 and 100,000 entries). Counted, not timed: the rows of `usage_entries` a
/// balance read fetches, from PostgreSQL's own counters for the reading transaction
/// (`pg_stat_xact_user_tables`). The timings are scripts/bench/usage's.
@Suite("Usage: the cost of a request against the ledger's size")
struct UsageCostTests {
    /// The rows of `usage_entries` this transaction has read so far (by index or by scan).
    static func entriesRead(on connection: Connection) async throws -> Int64 {
        let rows = try await connection.query(
            "SELECT COALESCE(idx_tup_fetch, 0) + COALESCE(seq_tup_read, 0) FROM pg_stat_xact_user_tables WHERE relname = 'usage_entries'")
        return try rows.first?.decode(Int64.self, at: 0) ?? 0
    }

    @Test("a balance read fetches the same few entries whether the ledger holds 50 or 3,000")
    func balanceReadsNoHistory() async throws {
        try await TestEnvironment.withFresh { env in
            let clock = ManualClock(start: try #require(RFC3339.parse("2026-01-10T12:00:00Z")))
            let first = try #require(RFC3339.parse("2025-10-20T00:00:00Z"))
            try await env.application(workers: 0, clock: clock).test(.router) { client in
                var read: [Int: Int64] = [:]
                for size in [50, 3_000] {
                    let account = "ledger-\(size)"
                    try await env.knownDevices(["phone"], of: account, since: first)
                    // The history: `size` minutes spread over 80 days, October to January (four periods,
                    // inside the 90-day late window), 500 a request.
                    var written = 0
                    while written < size {
                        let batch = (written..<min(size, written + 500)).map { index in
                            (id: "h\(index)", units: 1, at: first.addingTimeInterval(80 * 86_400 * Double(index) / Double(size)))
                        }
                        let (status, answer) = try await client.postJSON(
                            "/v1/accounts/\(account)/usage", body: try UsageAPITests.usageBody(device: "phone", batch))
                        #expect(status == .accepted, "\(answer)")
                        written += batch.count
                    }
                    let balances = try await env.pool.withConnection { connection in
                        try await connection.withTransaction(isolation: .repeatableRead) { connection in
                            let before = try await Self.entriesRead(on: connection)
                            let balances = try await UsageTotals.balances(
                                of: [account], meter: nil, catalogue: .default, now: clock.now(), storing: false, on: connection)
                            read[size] = try await Self.entriesRead(on: connection) - before
                            return balances[account] ?? []
                        }
                    }
                    // The read is right: the stored totals give what the whole ledger gives.
                    let recomputed = try await UsageLedger(pool: env.pool, catalogue: .default).recomputedBalances(of: account, now: clock.now())
                    #expect(balances == recomputed)
                    let used = balances.first { $0.meter == "minutes" }?.periods.reduce(0) { $0 + $1.used }
                    #expect(used == size, "every minute of the history counts")
                }
                // Only the entries outside every stored period are summed on the spot: none here.
                // Before the fix, every entry of the meter was read (3,000 of them).
                #expect(read[50] == read[3_000], "\(read)")
                #expect((read[3_000] ?? .max) <= 10, "\(read)")
            }
        }
    }
}
