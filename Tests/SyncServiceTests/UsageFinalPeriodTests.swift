import Foundation
import Hummingbird
import HummingbirdTesting
import Postgres
import SyncCore
import SyncService
import SyncStore
import TestSupport
import Testing

/// Final periods (docs/USAGE.md "Final periods"): a period that ended more than 90
/// days ago keeps its allowance, tier and totals whatever is reported later; a credit dated
/// inside it counts in the first open period; the recomputation and reconcile agree.
@Suite("Usage: final periods")
struct UsageFinalPeriodTests {
    static let day: TimeInterval = 86_400
    static func date(_ text: String) throws -> Date { try #require(RFC3339.parse(text)) }

    /// The periods of `minutes` as `GET /usage?period=all` answers them, by start.
    static func periods(_ client: some TestClientProtocol, account: String) async throws -> [String: [String: Any]] {
        let (_, read) = try await client.getJSON("/v1/accounts/\(account)/usage?period=all&meter=minutes")
        let periods = try #require((read["meters"] as? [[String: Any]])?.first?["periods"] as? [[String: Any]])
        return Dictionary(periods.compactMap { period in (period["start"] as? String).map { ($0, period) } }, uniquingKeysWith: { first, _ in first })
    }

    /// A basic subscription bought on March 8th and a pack of 100 minutes bought on March 9th
    /// (verified: only a verified pack grants), reported (and resolved) at the clock's now.
    static func lateReport(env: TestEnvironment, clock: ManualClock, account: String, device: String) async throws {
        let now = clock.now()
        let subscription = Report(
            reportID: "\(account)-sub", deviceID: device, observedAt: now, productID: "voip.basic.monthly",
            originalTransactionID: "\(account)-sub", transactionID: "\(account)-sub", purchasedAt: try date("2026-03-08T00:00:00Z"),
            expiresAt: try date("2026-04-08T00:00:00Z"), willAutoRenew: false)
        let pack = Report(
            reportID: "\(account)-pack", deviceID: device, observedAt: now, productID: "voip.credits.100",
            originalTransactionID: "\(account)-pack", transactionID: "\(account)-pack", purchasedAt: try date("2026-03-09T00:00:00Z"),
            trust: .verified(signedDate: now))
        _ = try await ReportInbox(pool: env.pool).submit(accountID: account, device: DeviceInfo(id: device), reports: [subscription, pack], seenAt: now)
        #expect(try await ResolutionEngine(pool: env.pool, catalogue: .default, clock: clock).resolvePendingBatch(limit: 10).reportsResolved == 2)
    }

    @Test("a purchase reported months late leaves final periods as they were; its credits count in the first open period; reconcile agrees")
    func lateFactsLeaveFinalPeriods() async throws {
        try await TestEnvironment.withFresh { env in
            let clock = ManualClock(start: try Self.date("2026-03-10T12:00:00Z"))
            try await env.application(workers: 0, clock: clock).test(.router) { client in
                // Two free accounts use 30 minutes on March 9th.
                for account in ["kept", "open"] {
                    try await env.knownDevices(["phone"], of: account, since: try Self.date("2026-03-01T00:00:00Z"))
                    let (status, answer) = try await client.postJSON(
                        "/v1/accounts/\(account)/usage", body: try UsageAPITests.usageBody(device: "phone", [("c1", 30, try Self.date("2026-03-09T10:00:00Z"))]))
                    #expect(status == .accepted, "\(answer)")
                }

                // "open" learns of its March purchases while March is within the late window:
                // March is re-derived (the subscription's tier from March 8th).
                clock.advance(by: .seconds(40 * Self.day))
                try await Self.lateReport(env: env, clock: clock, account: "open", device: "phone")
                let open = try await Self.periods(client, account: "open")
                #expect(open["2026-03-08T00:00:00Z"]?["allowance"] as? Int == 1000, "\(open)")
                #expect(open["2026-03-08T00:00:00Z"]?["used"] as? Int == 30, "\(open)")

                // Five months on, "kept" uses 10 minutes: February (its first contact, less the
                // clock skew, was in it), March and April have been over for more than 90 days, so
                // they become final as they were (free, 100 minutes).
                clock.advance(by: .seconds(110 * Self.day))
                let (status, answer) = try await client.postJSON(
                    "/v1/accounts/kept/usage", body: try UsageAPITests.usageBody(device: "phone", [("c2", 10, clock.now())]))
                #expect(status == .accepted, "\(answer)")
                let finals = try await env.pool.query(
                    "SELECT period_start, period_end, tier, allowance, used FROM usage_totals WHERE account_id = 'kept' AND final ORDER BY period_start")
                #expect(try finals.map { try $0.decode(Date.self, at: 0) } == [
                    try Self.date("2026-02-01T00:00:00Z"), try Self.date("2026-03-01T00:00:00Z"), try Self.date("2026-04-01T00:00:00Z"),
                ])
                #expect(try finals.map { try $0.decode(String.self, at: 2) } == ["free", "free", "free"])
                #expect(try finals.map { try $0.decode(Int64?.self, at: 3) } == [100, 100, 100])
                #expect(try finals.map { try $0.decode(Int64.self, at: 4) } == [0, 30, 0])

                // Now "kept" learns of the same March purchases: March stays free with its 30
                // minutes; the pack's 100 minutes count from May 1st (the first open period).
                try await Self.lateReport(env: env, clock: clock, account: "kept", device: "phone")
                let kept = try await Self.periods(client, account: "kept")
                #expect(kept["2026-03-01T00:00:00Z"]?["allowance"] as? Int == 100, "\(kept)")
                #expect(kept["2026-03-01T00:00:00Z"]?["used"] as? Int == 30, "\(kept)")
                #expect(kept["2026-03-08T00:00:00Z"] == nil, "\(kept)")
                #expect(try await env.scalar(
                    "SELECT count(*) FROM usage_entries WHERE account_id = 'kept' AND entry_id = 'credit:kept-pack' AND counted_at = '2026-05-01T00:00:00Z'") == 1)
                let ledger = UsageLedger(pool: env.pool, catalogue: .default)
                let balance = try #require(try await ledger.balances(of: "kept", now: clock.now()).first)
                #expect(balance.credits == 100)
                #expect(balance.current?.used == 10)
                // The final periods are not announced again.
                #expect(try await env.scalar(
                    "SELECT count(*) FROM usage_periods WHERE account_id = 'kept' AND revision_due AND period_end <= '2026-05-01T00:00:00Z'") == 0)

                // The stored totals, the recomputation from every entry and reconcile agree, for
                // both accounts (for "open", now that its March is final too).
                for account in ["kept", "open"] {
                    #expect(try await ledger.balances(of: account, now: clock.now()) == ledger.recomputedBalances(of: account, now: clock.now()))
                }
                let reconciler = Reconciler(pool: env.pool, catalogue: .default, clock: clock)
                #expect(try await reconciler.reconcile(accounts: ["kept", "open"], repair: false).differences == [])
                // A final row that drifted is found and summed again, keeping its allowance.
                try await env.pool.query(
                    "UPDATE usage_totals SET used = used + 7 WHERE account_id = 'kept' AND final AND period_start = '2026-03-01T00:00:00Z'")
                let drift = try await reconciler.reconcile(accounts: ["kept"], repair: true).differences
                #expect(drift.map(\.field) == ["usage_totals.minutes.2026-03-01T00:00:00Z"], "\(drift)")
                #expect(try await reconciler.reconcile(accounts: ["kept"], repair: false).differences == [])
                #expect(try await env.scalar(
                    "SELECT used FROM usage_totals WHERE account_id = 'kept' AND final AND allowance = 100 AND period_start = '2026-03-01T00:00:00Z'") == 30)
            }
        }
    }

    @Test("a timeline of final periods, then derived ones, is laid end to end from the last final end")
    func timelineAfterFinalPeriods() throws {
        let catalogue = Catalogue.default
        let meter = try #require(catalogue.meters.first)
        let final = [UsageTimeline.Period(
            period: UsagePeriod(start: try Self.date("2026-01-01T00:00:00Z"), end: try Self.date("2026-01-20T00:00:00Z")),
            tier: "free", allowance: .limited(100))]
        let periods = UsageTimeline.periods(
            meter: meter, catalogue: catalogue, transactions: [], from: try Self.date("2026-01-01T00:00:00Z"),
            through: try Self.date("2026-03-05T00:00:00Z"), after: final)
        #expect(periods.first == final.first)
        // Cut at the final end, then calendar months.
        #expect(periods.dropFirst().map(\.period.start) == [
            try Self.date("2026-01-20T00:00:00Z"), try Self.date("2026-02-01T00:00:00Z"), try Self.date("2026-03-01T00:00:00Z"),
        ])
        for (earlier, later) in zip(periods, periods.dropFirst()) { #expect(earlier.period.end == later.period.start) }
    }
}
