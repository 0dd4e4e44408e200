import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Postgres
import ServiceLifecycle
import SyncCore
import SyncService
import SyncStore
import Testing
import TestSupport

/// The worker pool and sweeper against a real database, several of them at once.
@Suite("Resolution pipeline")
struct PipelineTests {
    @Test("two worker pools on one database with many concurrent devices equal a sequential resolution")
    func concurrentPoolsMatchSequentialResolution() async throws {
        try await TestEnvironment.withFresh(poolSize: 16) { env in
            let reports = TestReports.randomReports(accounts: 40, perAccount: 12, seed: 7)
            let clock = ManualClock(start: TestReports.start)
            let appA = try env.application(workers: 2, batchSize: 7, clock: clock)
            let appB = try env.application(workers: 2, batchSize: 13, clock: clock)
            try await appA.testLive { clientA in
                try await appB.testLive { clientB in
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        // Each device sends its reports in chunks of 1–3, half to each process;
                        // 6 devices at a time. (The live test client pipelines requests on one
                        // connection and gives each 20 s: with every device at once, the last
                        // in line would wait longer than that on a busy core.)
                        let byDevice = Dictionary(grouping: reports) { "\($0.account)|\($0.device)" }
                        var inFlight = 0
                        for (key, items) in byDevice {
                            let account = String(key.split(separator: "|")[0])
                            let device = items[0].device
                            if inFlight == 6 {
                                try await group.next()
                                inFlight -= 1
                            }
                            inFlight += 1
                            group.addTask {
                                var index = 0
                                while index < items.count {
                                    let chunk = items[index..<min(index + 1 + index % 3, items.count)].map(\.report)
                                    let client: any TestClientProtocol = index % 2 == 0 ? clientA : clientB
                                    let result = try await client.sync(account: account, body: try SyncBody(device: device, reports: chunk).data, waitMilliseconds: nil)
                                    #expect(result.status == .accepted)
                                    index += chunk.count
                                }
                            }
                        }
                        try await group.waitForAll()
                    }
                    try await Self.waitUntilDrained(env.pool)
                }
            }

            // Every report was resolved exactly once.
            let statuses = try await env.pool.query("SELECT status, attempts, count(*) FROM reports GROUP BY 1, 2")
            let summary = try statuses.map { "\(try $0.decode(String.self, at: 0))/\(try $0.decode(Int.self, at: 1))=\(try $0.decode(Int.self, at: 2))" }
            #expect(summary == ["resolved/1=\(reports.count)"])

            // Persisted state equals a resolution of the same reports from scratch.
            let byAccount = Dictionary(grouping: reports, by: \.account)
            for (account, items) in byAccount {
                let expected = Resolver.resolve(reports: items.map(\.report), catalogue: .default, now: clock.now())
                let rows = try await env.pool.query("SELECT state FROM account_states WHERE account_id = \(account)")
                let stored = try rows[0].decode(JSONColumn<AccountState>.self, at: 0).value
                #expect(stored == expected, "account \(account)")
                let aggregates = try await env.pool.query("SELECT aggregate FROM transactions WHERE account_id = \(account) ORDER BY transaction_id")
                    .map { try $0.decode(JSONColumn<TransactionAggregate>.self, at: 0).value }
                #expect(aggregates == TransactionAggregate.aggregate(items.map(\.report)), "aggregates of \(account)")
            }

            // Sequence numbers are 1...n per account, no gaps or duplicates, and match last_sequence.
            let gaps = try await env.pool.query(
                """
                SELECT e.account_id FROM events e JOIN account_states s USING (account_id)
                GROUP BY e.account_id, s.last_sequence
                HAVING count(*) <> max(e.sequence) OR min(e.sequence) <> 1 OR max(e.sequence) <> s.last_sequence
                   OR count(DISTINCT e.sequence) <> count(*)
                """
            )
            #expect(gaps.count == 0)
            let accountsWithEvents = try await env.pool.query("SELECT count(DISTINCT account_id) FROM events")
            #expect(try accountsWithEvents[0].decode(Int.self, at: 0) > 0)
        }
    }

    @Test("a worker that dies mid-batch loses nothing: its claim is released and another worker resolves the reports")
    func workerKilledMidBatch() async throws {
        try await TestEnvironment.withFresh { env in
            let reports = (0..<20).map { TestReports.report("r\($0)", observed: Double($0)) }
            try await env.application(workers: 0).test(.router) { client in
                _ = try await client.sync(account: "zoe", body: try SyncBody(device: "iphone", reports: reports).data, waitMilliseconds: nil)
            }
            // A "worker" claims the whole batch and dies before committing.
            let doomed = try await Connection.connect(configuration: env.connection)
            try await doomed.execute(script: "BEGIN")
            let claimed = try await doomed.query("SELECT report_id FROM reports WHERE status = 'pending' ORDER BY arrival LIMIT 100 FOR UPDATE SKIP LOCKED")
            #expect(claimed.count == 20)
            try await doomed.query("UPDATE reports SET status = 'resolved' WHERE account_id = 'zoe'")  // uncommitted work
            try await env.pool.query("SELECT pg_terminate_backend(\(doomed.backendPID))")
            await doomed.close()

            #expect(try await env.pool.query("SELECT count(*) FROM reports WHERE status = 'pending'")[0].decode(Int.self, at: 0) == 20)
            try await env.application(workers: 1).testLive { _ in
                try await Self.waitUntilDrained(env.pool)
            }
            let resolved = try await env.pool.query("SELECT count(*) FROM reports WHERE account_id = 'zoe' AND status = 'resolved' AND attempts = 1")
            #expect(try resolved[0].decode(Int.self, at: 0) == 20)
            let state = try await env.pool.query("SELECT tier FROM account_states WHERE account_id = 'zoe'")
            #expect(try state[0].decode(String.self, at: 0) == "premium")
        }
    }

    @Test("the expiry sweeper expires an entitlement on time and emits entitlement.expired")
    func sweeperExpiresOnTime() async throws {
        try await TestEnvironment.withFresh { env in
            // Time is the test's: nothing expires until the test moves the clock, however slow
            // the machine, and then the sweeper (not a worker) is what notices.
            let clock = ManualClock()
            let now = clock.now()
            let expiry = now.addingTimeInterval(3600)
            let report = Report(
                reportID: "short", deviceID: "iphone", observedAt: now, productID: "voip.basic.monthly",
                originalTransactionID: "t1", transactionID: "t1", purchasedAt: now.addingTimeInterval(-60),
                expiresAt: expiry, willAutoRenew: false
            )
            try await env.application(workers: 1, sweepInterval: .seconds(60), clock: clock).testLive { client in
                let (_, json) = try await client.sync(account: "sam", body: try SyncBody(device: "iphone", reports: [report]).data, waitMilliseconds: 30_000)
                #expect(TestReports.entitlement(json, "basic")?["status"] as? String == "active")
                // A minute before the expiry the sweeper runs and changes nothing.
                #expect(await clock.waitForSleepers(atLeast: 1), "the sweeper never went to sleep")
                clock.advance(by: .seconds(3540))
                #expect(await clock.waitForSleepers(atLeast: 1))
                let early = try await env.pool.query("SELECT count(*) FROM events WHERE account_id = 'sam' AND type = 'entitlement.expired'")
                #expect(try early[0].decode(Int.self, at: 0) == 0)
                // Past the expiry, its next round expires the entitlement, dated by the clock.
                clock.advance(by: .seconds(120))
                var expiredAt: Date?
                _ = try await waitUntil(seconds: 300) {
                    let rows = try await env.pool.query("SELECT occurred_at FROM events WHERE account_id = 'sam' AND type = 'entitlement.expired'")
                    expiredAt = try rows.first?.decode(Date.self, at: 0)
                    return expiredAt != nil
                }
                let when = try #require(expiredAt, "no entitlement.expired event within 300 s of the expiry")
                #expect(when == clock.now(), "the event is dated by the sweep that saw the expiry")
                #expect(when >= expiry)
                let read = try await client.getJSON("/v1/accounts/sam").json
                #expect(read["tier"] as? String == "free")
                let origin = try await env.pool.query("SELECT origin FROM events WHERE account_id = 'sam' AND type = 'entitlement.expired'")
                #expect(try origin[0].decode(String.self, at: 0) == "sweeper")
            }
        }
    }

    /// Queues `count` accounts, one pending report each, in the order of their names.
    static func queueAccounts(_ count: Int, in env: TestEnvironment) async throws {
        let inbox = ReportInbox(pool: env.pool)
        for index in 0..<count {
            _ = try await inbox.submit(
                accountID: "share-\(index)", device: DeviceInfo(id: "iphone"), reports: [TestReports.report("s\(index)")])
        }
    }

    @Test("near the end of a backlog a claim takes its share of the queue rather than a full batch, and says what is left behind it")
    func claimsTakeTheirShareOfWhatIsLeft() async throws {
        try await TestEnvironment.withFresh { env in
            try await Self.queueAccounts(100, in: env)
            let engine = ResolutionEngine(pool: env.pool, catalogue: .default)
            // (entries left before the claim, workers sharing them) -> accounts claimed: the
            // limit (40) while the share is larger, a quarter of what is left after that, never
            // fewer than a tenth of the limit (4), and what is left when that is fewer.
            var left = 100
            for (workers, expected) in [(1, 40), (4, 15), (4, 12), (4, 9), (4, 6), (4, 5), (4, 4), (4, 4), (4, 4), (4, 1)] {
                let outcome = try await engine.resolvePendingBatch(limit: 40, sharedBy: workers)
                #expect(outcome.accountsResolved == expected, "\(left) left, shared by \(workers)")
                #expect(outcome.reportsResolved == expected)
                left -= expected
                #expect(outcome.queuedAfter == left)
            }
            #expect(left == 0)
            let pending = try await env.pool.query("SELECT count(*) FROM reports WHERE status = 'pending'")
            #expect(try pending[0].decode(Int.self, at: 0) == 0)
            let empty = try await engine.resolvePendingBatch(limit: 40, sharedBy: 4)
            #expect(empty.reportsResolved == 0 && empty.queuedAfter == 0)
        }
    }

    @Test("a worker whose claim was its share, less than a batch, goes on at once while entries are left, without waiting for a wake-up or the poll")
    func workersGoOnAfterTheirShare() async throws {
        try await TestEnvironment.withFresh { env in
            try await Self.queueAccounts(150, in: env)
            // Nothing raises `arrivals`, and the poll is ten minutes away: a worker that waited
            // after a claim of fewer than `batchSize` reports would leave the backlog pending.
            let pool = WorkerPool(
                engine: ResolutionEngine(pool: env.pool, catalogue: .default),
                workers: 2, batchSize: 100, pollInterval: .seconds(600), arrivals: WakeSignal(), resolutions: WakeSignal(),
                logger: env.logger)
            let pending = try await withThrowingTaskGroup(of: Int?.self) { group in
                group.addTask {
                    try await pool.run()
                    return nil
                }
                group.addTask {
                    let deadline = ContinuousClock.now + .seconds(900)
                    var left = Int.max
                    while left > 0, ContinuousClock.now < deadline {
                        try await Task.sleep(for: .milliseconds(50))
                        left = try await env.pool.query("SELECT count(*) FROM reports WHERE status = 'pending'")[0].decode(Int.self, at: 0)
                    }
                    return left
                }
                defer { group.cancelAll() }
                while let result = try await group.next() {
                    if let left = result { return left }
                }
                return -1
            }
            #expect(pending == 0)
            // Every claim took a share of fewer than 100 accounts (a batch's reports share their
            // transaction's `resolved_at`), so there were several. Not "at least three": two
            // claims that begin together each see 150 entries and take their half, 75 and 75,
            // skipping each other's rows (seen once under --stress).
            let batches = try await env.pool.query(
                "SELECT count(*), max(accounts) FROM (SELECT count(DISTINCT account_id) AS accounts FROM reports GROUP BY resolved_at) AS b")
            #expect(try batches[0].decode(Int.self, at: 0) >= 2)
            #expect(try batches[0].decode(Int.self, at: 1) < 100)
        }
    }

    @Test("a batch does not wait for an account another transaction holds: it queues it again and resolves the rest")
    func busyAccountIsDeferred() async throws {
        try await TestEnvironment.withFresh { env in
            let engine = ResolutionEngine(pool: env.pool, catalogue: .default)
            try await env.application(workers: 0).test(.router) { client in
                _ = try await client.sync(account: "busy", body: try SyncBody(device: "iphone", reports: [TestReports.report("b1")]).data, waitMilliseconds: nil)
            }
            #expect(try await engine.resolvePendingBatch(limit: 10).reportsResolved == 1)
            try await env.application(workers: 0).test(.router) { client in
                _ = try await client.sync(account: "busy", body: try SyncBody(device: "iphone", reports: [TestReports.report("b2")]).data, waitMilliseconds: nil)
                _ = try await client.sync(account: "free", body: try SyncBody(device: "iphone", reports: [TestReports.report("f1")]).data, waitMilliseconds: nil)
            }
            // Another transaction holds "busy" (as a worker, a binding or a usage write would).
            // If the batch waited for it, the server ends the holder after 900 s idle (far longer
            // than this test takes on a busy core), the expectations below fail and so does the
            // holder's COMMIT, instead of the test hanging.
            let holder = try await Connection.connect(configuration: env.connection)
            try await holder.execute(
                script: "SET idle_in_transaction_session_timeout = '900s'; BEGIN; SELECT 1 FROM account_states WHERE account_id = 'busy' FOR UPDATE")

            // Without waiting: "free" is resolved, "busy" is queued again with its report pending.
            let first: ResolutionEngine.Outcome
            do { first = try await engine.resolvePendingBatch(limit: 10) } catch { await holder.close(); throw error }
            #expect(first.reportsResolved == 1)
            #expect(first.accountsDeferred == 1)
            let pending = try await env.pool.query("SELECT account_id, report_id FROM reports WHERE status = 'pending'")
            #expect(try pending.map { "\(try $0.decode(String.self, at: 0))/\(try $0.decode(String.self, at: 1))" } == ["busy/b2"])
            let queued = try await env.pool.query("SELECT account_id FROM account_work")
            #expect(try queued.map { try $0.decode(String.self, at: 0) } == ["busy"])

            // Once the holder lets go, the next batch resolves it. (A holder the server ended
            // fails here, loudly.)
            try await holder.execute(script: "COMMIT")
            await holder.close()
            let second = try await engine.resolvePendingBatch(limit: 10)
            #expect(second.reportsResolved == 1)
            #expect(second.accountsDeferred == 0)
            let left = try await env.pool.query("SELECT count(*) FROM reports WHERE status = 'pending'")
            #expect(try left[0].decode(Int.self, at: 0) == 0)
            let reconciled = try await Reconciler(pool: env.pool, catalogue: .default).reconcile(accounts: ["busy", "free"], repair: false)
            #expect(reconciled.differences.isEmpty)
        }
    }

    @Test("a batch takes the claim queue entries of one bucket, the oldest entry's, and leaves the others queued in order")
    func batchesTakeOneBucket() async throws {
        try await TestEnvironment.withFresh { env in
            let engine = ResolutionEngine(pool: env.pool, catalogue: .default)
            try await env.application(workers: 0).test(.router) { client in
                for (account, id) in [("a-first", "r1"), ("b-second", "r2"), ("a-third", "r3"), ("c-fourth", "r4")] {
                    _ = try await client.sync(
                        account: account, body: try SyncBody(device: "iphone", reports: [TestReports.report(id)]).data, waitMilliseconds: nil)
                }
            }
            // One PostgreSQL queues every entry in bucket ''; these buckets stand for a cluster's
            // shards, as `subsync distribute` writes them (sql/0043).
            let untouched = try await env.pool.query("SELECT count(*) FROM account_work WHERE bucket = ''")
            #expect(try untouched[0].decode(Int.self, at: 0) == 4)
            try await env.pool.query("UPDATE account_work SET bucket = left(account_id, 1)")
            func pending() async throws -> [String] {
                try await env.pool.query("SELECT account_id FROM reports WHERE status = 'pending' ORDER BY account_id")
                    .map { try $0.decode(String.self, at: 0) }
            }
            let first = try await engine.resolvePendingBatch(limit: 10)
            #expect(first.reportsResolved == 2)
            #expect(try await pending() == ["b-second", "c-fourth"])
            let second = try await engine.resolvePendingBatch(limit: 10)
            #expect(second.reportsResolved == 1)
            #expect(try await pending() == ["c-fourth"])
            let third = try await engine.resolvePendingBatch(limit: 10)
            #expect(third.reportsResolved == 1)
            #expect(try await pending().isEmpty)
            let left = try await env.pool.query("SELECT count(*) FROM account_work")
            #expect(try left[0].decode(Int.self, at: 0) == 0)
        }
    }

    @Test("the sweeper's safety net looks at the oldest pending reports by arrival, queues those that lost their queue entry once they are old, and only once")
    func stalledReportsAreQueuedAgain() async throws {
        try await TestEnvironment.withFresh { env in
            // In arrival order: "queued" keeps its entry; "lost", "later" and "slow" lose theirs,
            // as a claim on Citus can take an entry before it sees the reports it stands for.
            // "slow" arrives last but was received an hour ago (its sync's transaction started
            // then: received_at is the transaction's start).
            try await env.application(workers: 0).test(.router) { client in
                for (account, id) in [("queued", "q1"), ("lost", "l1"), ("lost", "l2"), ("later", "t1"), ("slow", "s1")] {
                    _ = try await client.sync(
                        account: account, body: try SyncBody(device: "iphone", reports: [TestReports.report(id)]).data, waitMilliseconds: nil)
                }
            }
            try await env.pool.query("DELETE FROM account_work WHERE account_id IN ('lost', 'later', 'slow')")
            // The ages are the test clock's, not how long the syncs took on this machine: every
            // report but "slow" was received at `base`, "slow" an hour before.
            let base = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
            try await env.pool.query("UPDATE reports SET received_at = \(base) WHERE account_id <> 'slow'")
            try await env.pool.query("UPDATE reports SET received_at = \(base.addingTimeInterval(-3600)) WHERE account_id = 'slow'")
            func queued() async throws -> [String] {
                try await env.pool.query("SELECT account_id FROM account_work ORDER BY account_id").map { try $0.decode(String.self, at: 0) }
            }

            // Only the `limit` oldest by arrival are looked at, then their age: the four oldest
            // are younger than `age` (a claim may still be on its way to them), so nothing yet,
            // though "slow", fifth, is old.
            let now = ResolutionEngine(pool: env.pool, catalogue: .default, clock: ManualClock(start: base.addingTimeInterval(1)))
            #expect(try await now.requeueStalledAccounts(age: 30, limit: 4) == 0)
            #expect(try await queued() == ["queued"])
            #expect(try await now.requeueStalledAccounts(age: 30, limit: 10) == 1)
            #expect(try await queued() == ["queued", "slow"])

            // A minute on, the two oldest are "queued" (which has its entry) and "lost"; then the rest.
            let later = ResolutionEngine(pool: env.pool, catalogue: .default, clock: ManualClock(start: base.addingTimeInterval(60)))
            #expect(try await later.requeueStalledAccounts(age: 30, limit: 2) == 1)
            #expect(try await queued() == ["lost", "queued", "slow"])
            #expect(try await later.requeueStalledAccounts(age: 30, limit: 10) == 1)
            #expect(try await queued() == ["later", "lost", "queued", "slow"])
            // Queued once: a second sweep adds nothing.
            #expect(try await later.requeueStalledAccounts(age: 30, limit: 10) == 0)
            #expect(try await queued() == ["later", "lost", "queued", "slow"])

            // And the workers resolve them from there.
            #expect(try await later.resolvePendingBatch(limit: 10).reportsResolved == 5)
        }
    }

    @Test("the running parts name themselves in a few words, as the service group logs them, not as a dump of their catalogue and connections")
    func servicesNameThemselvesShortly() async throws {
        try await TestEnvironment.withFresh { env in
            let pool = WorkerPool(
                engine: ResolutionEngine(pool: env.pool, catalogue: .default),
                workers: 3, batchSize: 250, pollInterval: .seconds(1), arrivals: WakeSignal(), resolutions: WakeSignal(), logger: env.logger)
            var configuration = DeliveryWorker.Configuration()
            configuration.partition = (index: 1, count: 4)
            let worker = DeliveryLeaseTests.worker(configuration, in: env)
            // `"\(service)"` is what swift-service-lifecycle names a service with.
            #expect("\(pool)" == "WorkerPool(workers: 3, batch: 250)")
            #expect("\(worker)" == "DeliveryWorker(partition: 1 of 4)")
            #expect("\(MetricsSampler(pool: env.pool, logger: env.logger))" == "MetricsSampler")
        }
    }

    @Test("a batch does not wait for a new account that another transaction is creating; it queues it again")
    func accountBeingCreatedIsDeferred() async throws {
        try await TestEnvironment.withFresh { env in
            let engine = ResolutionEngine(pool: env.pool, catalogue: .default)
            try await env.application(workers: 0).test(.router) { client in
                _ = try await client.sync(account: "newbie", body: try SyncBody(device: "iphone", reports: [TestReports.report("n1")]).data, waitMilliseconds: nil)
                _ = try await client.sync(account: "free", body: try SyncBody(device: "iphone", reports: [TestReports.report("f1")]).data, waitMilliseconds: nil)
            }
            // Another worker's batch is creating "newbie" (its placeholder row inserted, not
            // committed). Waiting for it would end only when the server ends the holder after 900 s
            // idle (far longer than this test takes on a busy core), and the expectations below,
            // and the holder's ROLLBACK, would fail instead of the test hanging.
            let holder = try await Connection.connect(configuration: env.connection)
            try await holder.execute(
                script: """
                    SET idle_in_transaction_session_timeout = '900s'; BEGIN;
                    SELECT count(*) FROM subsync_lock_account_states(ARRAY['newbie'], true, 'free', '{"placeholder": true}'::json)
                    """)

            let first: ResolutionEngine.Outcome
            do { first = try await engine.resolvePendingBatch(limit: 10) } catch { await holder.close(); throw error }
            #expect(first.reportsResolved == 1)
            #expect(first.accountsDeferred == 1)
            let pending = try await env.pool.query("SELECT account_id, report_id FROM reports WHERE status = 'pending'")
            #expect(try pending.map { "\(try $0.decode(String.self, at: 0))/\(try $0.decode(String.self, at: 1))" } == ["newbie/n1"])
            let queued = try await env.pool.query("SELECT account_id FROM account_work")
            #expect(try queued.map { try $0.decode(String.self, at: 0) } == ["newbie"])

            // The other batch fails and rolls back: the next batch creates the account itself.
            try await holder.execute(script: "ROLLBACK")
            await holder.close()
            let second = try await engine.resolvePendingBatch(limit: 10)
            #expect(second.reportsResolved == 1)
            #expect(second.accountsDeferred == 0)
            let reconciled = try await Reconciler(pool: env.pool, catalogue: .default).reconcile(accounts: ["newbie", "free"], repair: false)
            #expect(reconciled.differences.isEmpty)
            let states = try await env.pool.query("SELECT count(*) FROM account_states WHERE resolved_at > '-infinity'")
            #expect(try states[0].decode(Int.self, at: 0) == 2)
        }
    }

    @Test("a batch reserves a new account under its advisory lock and writes its row once, with the resolved state; other lockers skip or wait for the reservation")
    func newAccountIsReservedNotCreated() async throws {
        try await TestEnvironment.withFresh { env in
            let engine = ResolutionEngine(pool: env.pool, catalogue: .default)
            try await env.application(workers: 0).test(.router) { client in
                _ = try await client.sync(account: "solo", body: try SyncBody(device: "iphone", reports: [TestReports.report("s1")]).data, waitMilliseconds: nil)
                _ = try await client.sync(account: "reserved", body: try SyncBody(device: "iphone", reports: [TestReports.report("r1")]).data, waitMilliseconds: nil)
            }
            // Another batch holds "reserved": the account is returned without a row (NULL state),
            // and not even its own transaction sees one. Should the worker's batch below wait for
            // it, the server ends the holder after 900 s idle and the test fails instead of
            // hanging; that is longer than every wait below (300 s, the waiter's 600 s lock_timeout).
            let holder = try await Connection.connect(configuration: env.connection)
            try await holder.execute(script: "SET idle_in_transaction_session_timeout = '900s'; BEGIN")
            let reservation = try await holder.query(
                "SELECT account_id, state IS NULL, last_sequence FROM subsync_lock_account_states_to_resolve(ARRAY['reserved'], true)")
            #expect(try reservation.map { "\(try $0.decode(String.self, at: 0))/\(try $0.decode(Bool.self, at: 1))/\(try $0.decode(Int.self, at: 2))" }
                == ["reserved/true/0"])
            let ownView = try await holder.query("SELECT count(*) FROM account_states WHERE account_id = 'reserved'")
            #expect(try ownView[0].decode(Int.self, at: 0) == 0, "a placeholder row was written")

            // A worker's batch leaves the reserved account for later and resolves the other one,
            // whose row it inserts once: one row version, never updated (ctid (0,1) in a fresh table).
            let first: ResolutionEngine.Outcome
            do { first = try await engine.resolvePendingBatch(limit: 10) } catch { await holder.close(); throw error }
            #expect(first.reportsResolved == 1)
            #expect(first.accountsDeferred == 1)
            let solo = try await env.pool.query("SELECT ctid::text, resolved_at > '-infinity', tier FROM account_states WHERE account_id = 'solo'")
            #expect(try solo.map { "\(try $0.decode(String.self, at: 0))/\(try $0.decode(Bool.self, at: 1))" } == ["(0,1)/true"])

            // A caller that waits (a usage write) queues on the reservation's advisory lock.
            let waiter = try await Connection.connect(configuration: env.connection)
            try await waiter.execute(script: "SET lock_timeout = '600s'; BEGIN")
            let locking = Task {
                try await waiter.query(
                    "SELECT account_id, state->>'by' FROM subsync_lock_account_states(ARRAY['reserved']::text[], false, 'free', '{\"by\": \"waiter\"}'::json)")
            }
            let queued = try await waitUntil(seconds: 300) {
                try await env.pool.query("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")[0].decode(Int.self, at: 0) == 1
            }
            #expect(queued)
            // The holder writes the row, as a batch does before it commits: the waiter then
            // locks that row rather than making its own.
            try await holder.execute(
                script: """
                    INSERT INTO account_states (account_id, tier, state, resolved_at) VALUES ('reserved', 'free', '{"by": "holder"}', now());
                    COMMIT
                    """)
            let rows = try await locking.value
            #expect(try rows.map { "\(try $0.decode(String.self, at: 0))/\(try $0.decode(String.self, at: 1))" } == ["reserved/holder"])
            try await waiter.execute(script: "ROLLBACK")
            await holder.close()
            await waiter.close()
        }
    }

    @Test("a caller that waits (a usage write, a binding) waits for the transaction creating the account, then locks the row it made, or makes it")
    func waitingLockerWaitsForTheCreator() async throws {
        try await TestEnvironment.withFresh { env in
            for creatorCommits in [true, false] {
                let account = creatorCommits ? "made-by-creator" : "made-by-waiter"
                let creator = try await Connection.connect(configuration: env.connection)
                let waiter = try await Connection.connect(configuration: env.connection)
                // The creator holds until the test lets go (no idle timeout ends it); the waiter's
                // lock_timeout (600 s, past the 300 s wait below) turns a wrong wait into an error.
                try await creator.execute(
                    script: """
                        SET idle_in_transaction_session_timeout = 0; BEGIN;
                        SELECT count(*) FROM subsync_lock_account_states(ARRAY['\(account)'], true, 'free', '{"by": "creator"}'::json)
                        """)
                try await waiter.execute(script: "SET lock_timeout = '600s'; BEGIN")
                let locking = Task {
                    try await waiter.query(
                        "SELECT account_id, state->>'by' FROM subsync_lock_account_states(ARRAY[\(account)]::text[], false, 'free', '{\"by\": \"waiter\"}'::json)")
                }
                // The waiter is queued on the account's advisory lock, not on the row's insert.
                let queued = try await waitUntil(seconds: 300) {
                    try await env.pool.query(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                    )[0].decode(Int.self, at: 0) == 1
                }
                #expect(queued)
                try await creator.execute(script: creatorCommits ? "COMMIT" : "ROLLBACK")
                let rows = try await locking.value
                #expect(try rows.map { "\(try $0.decode(String.self, at: 0))/\(try $0.decode(String.self, at: 1))" }
                    == ["\(account)/\(creatorCommits ? "creator" : "waiter")"])
                try await waiter.execute(script: "COMMIT")
                await creator.close()
                await waiter.close()
            }
            let rows = try await env.pool.query("SELECT count(*) FROM account_states")
            #expect(try rows[0].decode(Int.self, at: 0) == 2)
        }
    }

    @Test("a report that keeps failing is quarantined and does not block others")
    func poisonReportIsQuarantined() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application(workers: 0).test(.router) { client in
                _ = try await client.sync(account: "good", body: try SyncBody(device: "iphone", reports: [TestReports.report("g1")]).data, waitMilliseconds: nil)
                _ = try await client.sync(account: "poison", body: try SyncBody(device: "iphone", reports: [TestReports.report("p1")]).data, waitMilliseconds: nil)
            }
            // Corrupt the poison account's stored state so resolving it throws a decoding error.
            try await env.pool.query("INSERT INTO account_states (account_id, tier, state) VALUES ('poison', 'free', '{\"broken\": true}')")
            let engine = ResolutionEngine(pool: env.pool, catalogue: .default)
            for _ in 0..<5 { _ = try await engine.resolvePendingBatch(limit: 10, maximumAttempts: 3) }
            let rows = try await env.pool.query("SELECT account_id, status, attempts, last_error FROM reports ORDER BY account_id")
            let good = try #require(rows.first { try $0.decode(String.self, at: 0) == "good" })
            let poison = try #require(rows.first { try $0.decode(String.self, at: 0) == "poison" })
            #expect(try good.decode(String.self, at: 1) == "resolved")
            #expect(try poison.decode(String.self, at: 1) == "quarantined")
            #expect(try poison.decode(Int.self, at: 2) == 3)
            #expect(try poison.decode(String?.self, at: 3)?.isEmpty == false)
        }
    }

    /// Waits until no report is pending (at most 600 s).
    static func waitUntilDrained(_ pool: ConnectionPool) async throws {
        let drained = try await waitUntil(seconds: 600) {
            try await pool.query("SELECT count(*) FROM reports WHERE status = 'pending'")[0].decode(Int.self, at: 0) == 0
        }
        if !drained { Issue.record("reports still pending after 600 s") }
    }
}

@Suite("Resolution engine: time and round trips")
struct ResolutionEngineTests {
    @Test("a stored state read back equals the same state recomputed: re-resolving writes no event")
    func storedStateRoundTrips() async throws {
        try await TestEnvironment.withFresh { env in
            let engine = ResolutionEngine(pool: env.pool, catalogue: .default)
            var generator = SeededGenerator(seed: 99)
            // Purchases with millisecond residue, passes whose end is computed (stacked), an
            // auto-renewable without expiry (purchase + catalogue duration).
            var reports: [Report] = []
            for index in 0..<30 {
                let millis = Double(generator.next() % 1_000_000_000) / 1000
                let purchased = Date().addingTimeInterval(-86_400 * 10 + millis.truncatingRemainder(dividingBy: 86_400))
                let product = ["voip.premium.pass.3m", "voip.basic.pass.6m", "voip.business.monthly"][index % 3]
                reports.append(Report(
                    reportID: "r\(index)", deviceID: "d", observedAt: purchased, productID: product,
                    originalTransactionID: "t\(index)", transactionID: "t\(index)", purchasedAt: purchased
                ))
            }
            let outcome = try await env.pool.withTransaction { connection in
                try await engine.resolve(accounts: ["round"], newReports: ["round": reports], origin: .worker, on: connection)
            }
            #expect(outcome.eventsWritten > 0)
            let again = try await env.pool.withTransaction { connection in
                try await engine.resolve(accounts: ["round"], newReports: [:], origin: .sweeper, on: connection)
            }
            #expect(again.eventsWritten == 0)
        }
    }

    /// A batch's transactions new to their account are inserted, the stored ones written over:
    /// a stored one sent to the plain insert would fail the batch
    /// on its key, and one left out would lose its reports' count.
    @Test("a batch inserts the transactions new to an account and writes over its stored ones, counting every report")
    func newAndStoredTransactionsInOneBatch() async throws {
        try await TestEnvironment.withFresh { env in
            let engine = ResolutionEngine(pool: env.pool, catalogue: .default)
            let purchased = Date().addingTimeInterval(-86_400)
            func report(_ id: String, _ transaction: String, days: Double) -> Report {
                Report(
                    reportID: id, deviceID: "d", observedAt: purchased, productID: "voip.premium.monthly",
                    originalTransactionID: "t0", transactionID: transaction, purchasedAt: purchased,
                    expiresAt: purchased.addingTimeInterval(days * 86_400))
            }
            _ = try await env.pool.withTransaction { connection in
                try await engine.resolve(
                    accounts: ["mixed"], newReports: ["mixed": [report("a", "t0", days: 30), report("b", "t0", days: 31)]],
                    origin: .worker, on: connection)
            }
            // One more report of the stored t0 (a later expiry), three of the new t1, and an
            // account with nothing stored, in one resolution.
            _ = try await env.pool.withTransaction { connection in
                try await engine.resolve(
                    accounts: ["fresh", "mixed"],
                    newReports: [
                        "mixed": [report("c", "t0", days: 40), report("d", "t1", days: 60), report("e", "t1", days: 61), report("f", "t1", days: 62)],
                        "fresh": [report("g", "t9", days: 30)],
                    ],
                    origin: .worker, on: connection)
            }
            let rows = try await env.pool.query(
                "SELECT account_id, transaction_id, report_count, expires_at FROM transactions ORDER BY account_id, transaction_id")
            let stored = try rows.map { row in
                (try row.decode(String.self, at: 0), try row.decode(String.self, at: 1), try row.decode(Int.self, at: 2), try row.decode(Date.self, at: 3))
            }
            #expect(stored.map { "\($0.0)/\($0.1)/\($0.2)" } == ["fresh/t9/1", "mixed/t0/3", "mixed/t1/3"])
            #expect(abs(stored[1].3.timeIntervalSince(purchased.addingTimeInterval(40 * 86_400))) < 0.001)
            #expect(abs(stored[2].3.timeIntervalSince(purchased.addingTimeInterval(62 * 86_400))) < 0.001)
            // The stored aggregates hold every report's expiry: t0's row was written over.
            let aggregates = try await env.pool.query(
                "SELECT aggregate::text FROM transactions WHERE account_id = 'mixed' ORDER BY transaction_id"
            ).map { try JSONDecoder.postgres.decode(TransactionAggregate.self, from: Data(try $0.decode(String.self, at: 0).utf8)) }
            #expect(aggregates.map(\.expiresAt) == [stored[1].3, stored[2].3])
        }
    }

    /// States, aggregates and entitlement states are `json` (sql/0031): stored as the service
    /// encoded them, byte for byte (`jsonb` reorders the keys, adds spaces and parses every
    /// document on write), and compared as text, so a state that
    /// did not change keeps its `updated_at`.
    @Test("states, aggregates and entitlements are stored as the service's own JSON text, and an unchanged state keeps its updated_at")
    func storedDocumentsAreTheServiceText() async throws {
        try await TestEnvironment.withFresh { env in
            let engine = ResolutionEngine(pool: env.pool, catalogue: .default)
            let purchased = Date().addingTimeInterval(-86_400)
            let reports = ["voip.premium.monthly", "voip.basic.pass.6m"].enumerated().map { index, product in
                Report(
                    reportID: "r\(index)", deviceID: "d", observedAt: purchased, productID: product,
                    originalTransactionID: "t\(index)", transactionID: "t\(index)", purchasedAt: purchased,
                    expiresAt: index == 0 ? purchased.addingTimeInterval(30 * 86_400) : nil)
            }
            _ = try await env.pool.withTransaction { connection in
                try await engine.resolve(accounts: ["text"], newReports: ["text": reports], origin: .worker, on: connection)
            }
            /// Each stored document's type, and whether its text is what the service writes for
            /// the value it decodes to.
            func stored<T: Codable>(_ type: T.Type, _ sql: PostgresQuery) async throws -> [(type: String, same: Bool)] {
                try await env.pool.query(sql).map { row in
                    let text = try row.decode(String.self, at: 1)
                    let value = try JSONDecoder.postgres.decode(T.self, from: Data(text.utf8))
                    return (try row.decode(String.self, at: 0), try PostgresJSONEncoder.string(value) == text)
                }
            }
            let states = try await stored(AccountState.self, "SELECT pg_typeof(state)::text, state::text FROM account_states WHERE account_id = 'text'")
            let aggregates = try await stored(
                TransactionAggregate.self, "SELECT pg_typeof(aggregate)::text, aggregate::text FROM transactions WHERE account_id = 'text'")
            let entitlements = try await stored(
                EntitlementState.self, "SELECT pg_typeof(state)::text, state::text FROM entitlements WHERE account_id = 'text'")
            #expect(states.count == 1 && aggregates.count == 2 && entitlements.count == 2)
            for document in states + aggregates + entitlements {
                #expect(document.type == "json")
                #expect(document.same, "a stored document is not the service's own text")
            }
            let updatedAt: PostgresQuery = "SELECT updated_at FROM account_states WHERE account_id = 'text'"
            let before = try await env.pool.query(updatedAt)[0].decode(Date.self, at: 0)
            _ = try await env.pool.withTransaction { connection in
                try await engine.resolve(accounts: ["text"], newReports: [:], origin: .sweeper, on: connection)
            }
            let after = try await env.pool.query(updatedAt)[0].decode(Date.self, at: 0)
            #expect(after == before)
        }
    }

    @Test("a resolver whose clock is behind never moves an account's state back in time")
    func clockNeverGoesBack() async throws {
        try await TestEnvironment.withFresh { env in
            let now = Date()
            let expiry = now.addingTimeInterval(60)
            let report = Report(
                reportID: "r1", deviceID: "d", observedAt: now.addingTimeInterval(-60), productID: "voip.basic.monthly",
                originalTransactionID: "t1", transactionID: "t1", purchasedAt: now.addingTimeInterval(-3600), expiresAt: expiry
            )
            // A process whose clock is past the expiry resolves first...
            let ahead = ResolutionEngine(pool: env.pool, catalogue: .default, clock: ManualClock(start: expiry.addingTimeInterval(1)))
            _ = try await env.pool.withTransaction { connection in
                try await ahead.resolve(accounts: ["acct"], newReports: ["acct": [report]], origin: .worker, on: connection)
            }
            // ...then one with a clock before the expiry: the account must stay expired.
            let behind = ResolutionEngine(pool: env.pool, catalogue: .default, clock: ManualClock(start: now))
            let outcome = try await env.pool.withTransaction { connection in
                try await behind.resolve(accounts: ["acct"], newReports: [:], origin: .sweeper, on: connection)
            }
            #expect(outcome.eventsWritten == 0)
            let status = try await env.pool.query("SELECT status FROM entitlements WHERE account_id = 'acct'")
            #expect(try status[0].decode(String.self, at: 0) == "expired")
        }
    }
}
