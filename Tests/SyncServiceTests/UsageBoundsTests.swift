import Foundation
import Hummingbird
import HummingbirdTesting
import Postgres
import SyncCore
import SyncService
import SyncStore
import TestSupport
import Testing

/// Backdating, bounds and paging of the usage ledger (docs/USAGE.md "Late usage",
/// "Bounds"; paging: docs/API.md "Usage"): each abuse sent as an attacker would, refused or neutral, and the
/// legitimate use beside it still served.
@Suite("Usage: backdating, bounds and pages")
struct UsageBoundsTests {
    static let day: TimeInterval = 86_400

    static func usage(_ device: String, _ entries: [(id: String, units: Int, at: Date)]) throws -> Data {
        try UsageAPITests.usageBody(device: device, entries)
    }

    @Test("a new account or a new device id cannot place usage before it first reached the service; a known device's offline calls land in their period")
    func backdatingIsRefused() async throws {
        try await TestEnvironment.withFresh { env in
            let clock = ManualClock(start: Date().addingTimeInterval(-10 * Self.day))
            try await env.application(workers: 0, clock: clock).test(.router) { client in
                let t0 = clock.now()
                // A brand-new free account reports 100 minutes dated 80 days ago, then 100 dated
                // 50 days ago: refused, named, nothing stored.
                var (status, answer) = try await client.postJSON(
                    "/v1/accounts/fresh/usage", body: try Self.usage("phone", [("c1", 100, t0.addingTimeInterval(-80 * Self.day))]))
                #expect(status == .unprocessableContent)
                #expect(answer.errorCode == "before_first_contact")
                #expect(answer.errorMessage?.contains("usage[0].at") == true, "\(answer)")
                (status, answer) = try await client.postJSON(
                    "/v1/accounts/fresh/usage",
                    body: try Self.usage("phone", [("ok", 5, t0), ("c2", 100, t0.addingTimeInterval(-50 * Self.day))]))
                #expect(answer.errorCode == "before_first_contact")
                #expect(answer.errorMessage?.contains("usage[1].at") == true, "\(answer)")
                #expect(try await env.scalar("SELECT count(*) FROM usage_entries WHERE account_id = 'fresh'") == 0)

                // A device that synced at t0 goes offline; ten days later its calls of days 1 and 2
                // arrive and land in the period they happened in.
                let purchase = Report(
                    reportID: "b1", deviceID: "tablet", observedAt: t0, productID: "voip.basic.monthly", originalTransactionID: "t-b",
                    transactionID: "t-b", purchasedAt: t0.addingTimeInterval(-5 * Self.day), expiresAt: t0.addingTimeInterval(25 * Self.day),
                    willAutoRenew: true)
                _ = try await client.sync(account: "known", body: try SyncBody(device: "tablet", reports: [purchase]).data, waitMilliseconds: nil)
                // Resolved as a worker would (its period, [t0 - 5 days, t0 + 25 days), holds both calls).
                #expect(try await ResolutionEngine(pool: env.pool, catalogue: .default, clock: clock).resolvePendingBatch(limit: 10).reportsResolved == 1)
                clock.advance(by: .seconds(10 * Self.day))
                (status, answer) = try await client.postJSON(
                    "/v1/accounts/known/usage",
                    body: try Self.usage("tablet", [("d1", 30, t0.addingTimeInterval(Self.day)), ("d2", 20, t0.addingTimeInterval(2 * Self.day))]))
                #expect(status == .accepted, "\(answer)")
                // Rotating device ids gains nothing: a new id cannot date calls before now.
                (status, answer) = try await client.postJSON(
                    "/v1/accounts/known/usage", body: try Self.usage("tablet-2", [("x1", 500, t0.addingTimeInterval(Self.day))]))
                #expect(answer.errorCode == "before_first_contact")
                let (_, read) = try await client.getJSON("/v1/accounts/known/usage?period=all&meter=minutes")
                let periods = try #require((read["meters"] as? [[String: Any]])?.first?["periods"] as? [[String: Any]])
                let used = periods.reduce(0) { $0 + ($1["used"] as? Int ?? 0) }
                #expect(used == 50, "\(periods)")
                // Both calls are in the period that contains their time.
                let owner = periods.first { period in
                    guard let start = (period["start"] as? String).flatMap(RFC3339.parse), let end = (period["end"] as? String).flatMap(RFC3339.parse)
                    else { return false }
                    return start <= t0.addingTimeInterval(Self.day) && t0.addingTimeInterval(2 * Self.day) < end
                }
                #expect(owner?["used"] as? Int == 50, "\(periods)")
            }
        }
    }

    @Test("the late window is a setting; a settle's at lies between the hold's creation and now")
    func lateWindowAndSettleTime() async throws {
        try await TestEnvironment.withFresh { env in
            let clock = ManualClock(start: Date())
            try await env.application(workers: 0, clock: clock, usagePolicy: UsagePolicy(lateWindow: Self.day)).test(.router) { client in
                let now = clock.now()
                try await env.knownDevices(["phone"], of: "win", since: now.addingTimeInterval(-30 * Self.day))
                var (status, answer) = try await client.postJSON(
                    "/v1/accounts/win/usage", body: try Self.usage("phone", [("old", 5, now.addingTimeInterval(-2 * Self.day))]))
                #expect(status == .unprocessableContent)
                #expect(answer.errorCode == "invalid_time")
                #expect(answer.errorMessage?.contains("1 day") == true, "\(answer)")
                (status, _) = try await client.postJSON(
                    "/v1/accounts/win/usage", body: try Self.usage("phone", [("recent", 5, now.addingTimeInterval(-3_600))]))
                #expect(status == .accepted)

                // A hold reserved now cannot be settled in the past, nor ahead of the clock.
                let (_, reserved) = try await client.postJSON("/v1/accounts/win/usage/holds", body: try UsageHoldTests.holdBody(device: "phone", units: 10))
                let hold = try #require((reserved["hold"] as? [String: Any])?["id"] as? String)
                for at in [now.addingTimeInterval(-50 * Self.day), now.addingTimeInterval(-60), now.addingTimeInterval(120)] {
                    let body = try JSONSerialization.data(withJSONObject: ["units": 10, "at": RFC3339.format(at)])
                    (status, answer) = try await client.postJSON("/v1/accounts/win/usage/holds/\(hold)/settle", body: body)
                    #expect(status == .unprocessableContent, "\(at): \(answer)")
                    #expect(answer.errorCode == "invalid_time")
                }
                clock.advance(by: .seconds(90))
                let body = try JSONSerialization.data(withJSONObject: ["units": 10, "at": RFC3339.format(now.addingTimeInterval(30))])
                (status, answer) = try await client.postJSON("/v1/accounts/win/usage/holds/\(hold)/settle", body: body)
                #expect(status == .ok, "\(answer)")
                #expect(try await env.scalar("SELECT count(*) FROM usage_entries WHERE account_id = 'win' AND kind = 'usage'") == 2)
            }
        }
    }

    @Test("twenty late batches into two closed periods are announced once per period by the next sweep, with the final totals")
    func lateChangesAreCoalesced() async throws {
        try await TestEnvironment.withFresh { env in
            let clock = ManualClock(start: Date())
            // Live, with a worker: the sweeper is one of the application's services (beside the
            // workers), which the router test does not run.
            try await env.application(workers: 1, sweepInterval: .seconds(3_600), clock: clock).testLive { client in
                let now = clock.now()
                try await env.knownDevices(["phone"], of: "late", since: now.addingTimeInterval(-89 * Self.day))
                // The sweeper's first pass (at start) is over: it sleeps on the clock.
                #expect(await clock.waitForSleepers(atLeast: 1))
                // The last hour of each of the two calendar months before this one (free periods,
                // closed, inside the 90-day window whatever today is).
                let month = try #require(ISODuration("P1M"))
                let current = UsagePeriod.containing(now, anchor: UsagePeriod.calendarAnchor, length: month)
                let previous = UsagePeriod.containing(current.start.addingTimeInterval(-1), anchor: UsagePeriod.calendarAnchor, length: month)
                let times = [current.start.addingTimeInterval(-3_600), previous.start.addingTimeInterval(-3_600)]
                // One call in each period first: each closes (revision 1) as the writer sees it.
                _ = try await client.postJSON("/v1/accounts/late/usage", body: try Self.usage("phone", times.enumerated().map { ("first-\($0.offset)", 1, $0.element) }))
                let closedFirst = try await env.scalar("SELECT count(*) FROM events WHERE account_id = 'late' AND type = 'usage.period_closed'")
                #expect(closedFirst == 2)
                for batch in 0..<20 {
                    let (status, _) = try await client.postJSON(
                        "/v1/accounts/late/usage", body: try Self.usage("phone", times.enumerated().map { ("b\(batch)-\($0.offset)", 1, $0.element) }))
                    #expect(status == .accepted)
                }
                // The writers only marked the two periods; nothing more was announced.
                #expect(try await env.scalar("SELECT count(*) FROM events WHERE account_id = 'late' AND type = 'usage.period_closed'") == 2)
                #expect(try await env.scalar("SELECT count(*) FROM usage_periods WHERE account_id = 'late' AND revision_due") == 2)
                // The sweep: one revision per period, with the final totals (21 minutes each).
                clock.advance(by: .seconds(3_601))
                let swept = try await waitUntil(seconds: 300) {
                    try await env.scalar("SELECT count(*) FROM usage_periods WHERE account_id = 'late' AND revision_due") == 0
                }
                #expect(swept)
                #expect(try await env.scalar("SELECT count(*) FROM events WHERE account_id = 'late' AND type = 'usage.period_closed'") == 4)
                let revisions = try await env.pool.query(
                    """
                    SELECT (payload->'usage'->>'revision')::int, (payload->'usage'->>'used')::int FROM events
                    WHERE account_id = 'late' AND type = 'usage.period_closed' AND origin = 'sweeper' ORDER BY sequence
                    """
                ).map { "\(try $0.decode(Int.self, at: 0))/\(try $0.decode(Int.self, at: 1))" }
                #expect(revisions == ["2/21", "2/21"])
                _ = client
            }
        }
    }

    @Test("an account's entries per period and open holds are bounded, with a clear 422 and 429")
    func boundsPerAccount() async throws {
        try await TestEnvironment.withFresh { env in
            let clock = ManualClock(start: Date())
            let policy = UsagePolicy(maximumEntriesPerPeriod: 5, maximumOpenHolds: 2)
            try await env.application(workers: 0, clock: clock, usagePolicy: policy).test(.router) { client in
                let now = clock.now()
                var (status, answer) = try await client.postJSON(
                    "/v1/accounts/busy/usage", body: try Self.usage("phone", (0..<4).map { ("c\($0)", 1, now) }))
                #expect(status == .accepted, "\(answer)")
                // Two more would make six: the batch is refused whole.
                (status, answer) = try await client.postJSON(
                    "/v1/accounts/busy/usage", body: try Self.usage("phone", [("c4", 1, now), ("c5", 1, now)]))
                #expect(status == .unprocessableContent)
                #expect(answer.errorCode == "period_full")
                #expect(try await env.scalar("SELECT count(*) FROM usage_entries WHERE account_id = 'busy'") == 4)
                // Duplicates do not count; one more fits.
                (status, answer) = try await client.postJSON(
                    "/v1/accounts/busy/usage", body: try Self.usage("phone", [("c0", 1, now), ("c4", 1, now)]))
                #expect(status == .accepted, "\(answer)")
                #expect(answer["accepted"] as? Int == 1)

                // Holds: two open, the third is 429 with Retry-After; releasing one frees a place.
                var holds: [String] = []
                for _ in 0..<2 {
                    let (created, hold) = try await client.postJSON("/v1/accounts/busy/usage/holds", body: try UsageHoldTests.holdBody(device: "phone", units: 1, ttl: 600))
                    #expect(created == .created)
                    holds.append(try #require((hold["hold"] as? [String: Any])?["id"] as? String))
                }
                let retryAfter = try await client.execute(
                    uri: "/v1/accounts/busy/usage/holds", method: .post,
                    headers: [.authorization: "Bearer \(TestCredentials.adminKey)", .contentType: "application/json"],
                    body: ByteBuffer(bytes: try UsageHoldTests.holdBody(device: "tablet", units: 1))
                ) { response in
                    #expect(response.status == .tooManyRequests)
                    return response.headers[.retryAfter]
                }
                // Until the first hold expires (600 s, rounded up to whole seconds).
                #expect(retryAfter.flatMap(Int.init).map { (1...601).contains($0) } == true, "Retry-After \(retryAfter ?? "none")")
                _ = try await client.execute(uri: "/v1/accounts/busy/usage/holds/\(holds[0])", method: .delete,
                                             headers: [.authorization: "Bearer \(TestCredentials.adminKey)"]) { _ in }
                (status, _) = try await client.postJSON("/v1/accounts/busy/usage/holds", body: try UsageHoldTests.holdBody(device: "tablet", units: 1))
                #expect(status == .created)
            }
        }
    }

    @Test("GET /usage pages its entries newest first; every entry is on exactly one page; a forged cursor is a 400")
    func entriesArePaged() async throws {
        try await TestEnvironment.withFresh { env in
            let clock = ManualClock(start: Date())
            try await env.application(workers: 0, clock: clock).test(.router) { client in
                let now = clock.now()
                try await env.knownDevices(["phone"], of: "pages", since: now.addingTimeInterval(-Self.day))
                let sent = (0..<7).map { ("c\($0)", 1, now.addingTimeInterval(-Double($0) * 60)) }
                _ = try await client.postJSON("/v1/accounts/pages/usage", body: try Self.usage("phone", sent))
                var seen: [String] = []
                var cursor: String?
                var pages = 0
                repeat {
                    let query = "/v1/accounts/pages/usage?meter=minutes&limit=3" + (cursor.map { "&cursor=\($0)" } ?? "")
                    let (status, read) = try await client.getJSON(query)
                    #expect(status == .ok, "\(read)")
                    let meter = try #require((read["meters"] as? [[String: Any]])?.first)
                    let ids = (meter["entries"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
                    #expect(ids.count <= 3)
                    seen += ids
                    cursor = meter["next_cursor"] as? String
                    pages += 1
                } while cursor != nil && pages < 10
                #expect(pages == 3)
                #expect(seen == (0..<7).map { "usage:phone:c\($0)" }, "newest first, each once: \(seen)")
                for forged in ["AAAA", "not-base64!", String(repeating: "A", count: 2_000), Data("minutes\u{0}99999999999999999999\u{0}x".utf8).base64EncodedString()] {
                    let (status, read) = try await client.getJSON("/v1/accounts/pages/usage?cursor=\(forged.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")")
                    #expect(status == .badRequest, "\(forged.prefix(20)): \(read)")
                    #expect(read.errorCode == "invalid_cursor")
                }
                let (tooMany, _) = try await client.getJSON("/v1/accounts/pages/usage?limit=1001")
                #expect(tooMany == .badRequest)
            }
        }
    }

    @Test("reconcile reports an allowance row the facts do not justify and stored totals that drifted, and repairs both")
    func reconcileRepairsAllowancesAndTotals() async throws {
        try await TestEnvironment.withFresh { env in
            let now = Date()
            try await env.knownDevices(["phone"], of: "drift", since: now.addingTimeInterval(-3 * Self.day))
            let ledger = UsageLedger(pool: env.pool, catalogue: .default)
            _ = try await ledger.submit(
                [UsageEntry(id: "usage:phone:c1", meter: "minutes", kind: .usage, units: 30, at: now.addingTimeInterval(-3_600))],
                accountID: "drift", device: DeviceInfo(id: "phone"), now: now)
            // What an earlier version recorded when usage arrived before a subscription: a free
            // allowance of a period the account did not have as such; and a total that drifted.
            try await env.pool.query(
                """
                INSERT INTO usage_entries (account_id, meter, entry_id, kind, units, at, period_end)
                VALUES ('drift', 'minutes', 'allowance:minutes:2020-01-01T00:00:00Z:free', 'allowance', 100, '2020-01-01', '2020-02-01')
                """)
            try await env.pool.query("UPDATE usage_totals SET used = used + 5 WHERE account_id = 'drift'")
            #expect(try await ledger.balances(of: "drift", now: now) != ledger.recomputedBalances(of: "drift", now: now))
            let reconciler = Reconciler(pool: env.pool, catalogue: .default)
            let drift = try await reconciler.reconcile(accounts: ["drift"], repair: false).differences.map(\.field)
            #expect(drift.contains("usage_entries.allowance"), "\(drift)")
            #expect(drift.contains { $0.hasPrefix("usage_totals.minutes.") }, "\(drift)")
            _ = try await reconciler.reconcile(accounts: ["drift"], repair: true)
            #expect(try await reconciler.reconcile(accounts: ["drift"], repair: false).differences == [])
            #expect(try await env.scalar("SELECT count(*) FROM usage_entries WHERE account_id = 'drift' AND kind = 'allowance'") == 0)
            #expect(try await ledger.balances(of: "drift", now: now) == ledger.recomputedBalances(of: "drift", now: now))
            #expect(try await ledger.balances(of: "drift", now: now).first?.current?.used == 30)
        }
    }
}
