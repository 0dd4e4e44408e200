import Curl
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Postgres
import ServiceLifecycle
import SyncCore
import SyncService
import SyncStore
import TestSupport
import Testing

/// Ordered delivery: an account's events reach an endpoint in sequence order, whichever sender
/// (delivery loop or process) sends them, and a failure holds back only its own stream.
@Suite("Webhook order", .serialized)
struct WebhookOrderTests {
    static let loopback = try? AddressGuard(allow: ["127.0.0.0/8", "::1/128"])

    /// Requests that reached the receiver before every earlier event of their stream (path and
    /// account) had been answered 2xx: a sender went ahead of a pending event. Empty when the
    /// order held.
    static func sentTooEarly(_ entries: [WebhookReceiver.Entry]) -> [String] {
        var succeeded: [String: Set<Int>] = [:]
        var violations: [String] = []
        for entry in entries {
            guard let data = entry.body?.data else { continue }
            let stream = "\(entry.path) \(data.accountID)"
            let done = succeeded[stream, default: []]
            if let missing = (1..<max(1, data.sequence)).first(where: { !done.contains($0) }) {
                violations.append("\(stream): sequence \(data.sequence) sent before \(missing) succeeded")
            }
            if (200..<300).contains(entry.status) { succeeded[stream, default: []].insert(data.sequence) }
        }
        return violations
    }

    /// Per stream, the sequences in the order they first arrived with a 2xx.
    static func firstArrivals(_ entries: [WebhookReceiver.Entry]) -> [String: [Int]] {
        var seen = Set<String>()
        var order: [String: [Int]] = [:]
        for entry in entries where (200..<300).contains(entry.status) {
            guard let data = entry.body?.data, seen.insert("\(entry.path) \(entry.id)").inserted else { continue }
            order["\(entry.path) \(data.accountID)", default: []].append(data.sequence)
        }
        return order
    }

    @Test("a failing event holds back its account's later events until it succeeds, and holds back no other account")
    func failureHoldsBackItsStream() async throws {
        let receiver = try await WebhookReceiver()
        try await TestEnvironment.withFresh { env in
            let (_, secret) = try await EndpointStore(pool: env.pool).create(url: receiver.url("/ok"), eventTypes: nil)
            try await receiver.setSecrets([secret.text])
            try await receiver.setMode("500")
            // Alice's retry comes 4.8–7.2 s after her failure on the test's clock, which stands
            // still until Bob's event is in: Bob's stream must not wait for Alice's retry.
            let clock = ManualClock(start: Date())
            let schedule = RetrySchedule(delays: [6, 6, 6, 6])
            try await env.application(deliveryWorkers: 2, webhookGuard: Self.loopback, retrySchedule: schedule, clock: clock).testLive { client in
                let first = try await client.sync(account: "alice", body: try SyncBody(device: "iphone", reports: [TestReports.report("a1")]).data)
                #expect(first.status == .accepted)
                let failed = try await receiver.waitFor { $0.contains { $0.status == 500 } }
                #expect(failed.contains { $0.status == 500 && $0.body?.data.accountID == "alice" })
                try await receiver.setMode("ok")
                // Alice's next events are due now, but her first is waiting for its retry.
                let second = try await client.sync(
                    account: "alice", body: try SyncBody(device: "iphone", reports: [TestReports.report("a2", revoked: 0)]).data)
                #expect(second.status == .accepted)
                let other = try await client.sync(account: "bob", body: try SyncBody(device: "ipad", reports: [TestReports.report("b1")]).data)
                #expect(other.status == .accepted)

                // wait_ms returned once resolved, so both accounts' events are written.
                let events = try await env.pool.query("SELECT event_id::text, account_id, sequence FROM events ORDER BY account_id, sequence")
                    .map { (id: try $0.decode(String.self, at: 0), account: try $0.decode(String.self, at: 1), sequence: try $0.decode(Int.self, at: 2)) }
                #expect(events.filter { $0.account == "alice" }.count >= 4, "alice: activation and revocation events")
                #expect(events.contains { $0.account == "bob" })
                // Bob's event arrives while Alice's retry is not due yet.
                let beforeRetry = try await receiver.waitFor { entries in
                    entries.contains { $0.status == 200 && $0.body?.data.accountID == "bob" }
                }
                #expect(beforeRetry.contains { $0.status == 200 && $0.body?.data.accountID == "bob" })
                #expect(!beforeRetry.contains { $0.status == 200 && $0.body?.data.accountID == "alice" }, "alice's events went before her retry")
                clock.advance(by: .seconds(10))
                let entries = try await receiver.waitFor(seconds: 300) { entries in
                    Set(entries.filter { $0.status == 200 }.map(\.id)).isSuperset(of: events.map(\.id))
                }
                #expect(Set(entries.filter { $0.status == 200 }.map(\.id)).isSuperset(of: events.map(\.id)), "every event delivered")
                #expect(entries.allSatisfy { !$0.verifiedBy.isEmpty })
                #expect(Self.sentTooEarly(entries) == [])
                let arrivals = Self.firstArrivals(entries)
                for account in ["alice", "bob"] {
                    let last = events.filter { $0.account == account }.map(\.sequence).max() ?? 0
                    #expect(arrivals["/ok \(account)"] == Array(1..<(last + 1)), "\(account)")
                }
                // Bob's stream did not wait for Alice's retry.
                let bobDelivered = entries.firstIndex { $0.status == 200 && $0.body?.data.accountID == "bob" }
                let aliceDelivered = entries.firstIndex { $0.status == 200 && $0.body?.data.accountID == "alice" }
                #expect(bobDelivered != nil && aliceDelivered != nil)
                if let bobDelivered, let aliceDelivered { #expect(bobDelivered < aliceDelivered) }
            }
        }
    }

    /// Syncs `reports` for `account` while the receiver fails, waits for the failed attempt, then
    /// heals the receiver and syncs `more`: the account's first events are retrying, later ones wait.
    func failFirstThenSync(
        _ client: some TestClientProtocol, _ receiver: WebhookReceiver, account: String, _ reports: [Report], then more: [Report]
    ) async throws {
        try await receiver.setMode("500")
        let first = try await client.sync(account: account, body: try SyncBody(device: "iphone", reports: reports).data)
        #expect(first.status == .accepted)
        let failed = try await receiver.waitFor { $0.contains { $0.status == 500 && $0.body?.data.accountID == account } }
        #expect(failed.contains { $0.status == 500 && $0.body?.data.accountID == account })
        try await receiver.setMode("ok")
        let second = try await client.sync(account: account, body: try SyncBody(device: "iphone", reports: more).data)
        #expect(second.status == .accepted)
    }

    /// The account's deliveries, as `subsync deliveries list --status pending --json` shows them,
    /// once there are `count` and the first has been attempted: the receiver logs the failing
    /// answer before the delivery worker records the attempt, and on a busy core the list can
    /// come in between.
    func pendingDeliveries(_ env: TestEnvironment, account: String, count: Int) async throws -> [[String: Any]] {
        var listed: [[String: Any]] = []
        await waitUntil {
            guard let out = try? await SubsyncCommand.run(["deliveries", "list", "--status", "pending", "--json"], env: env) else { return false }
            #expect(out.status == 0, "\(out.stderr)")
            listed = out.array.filter { $0["account_id"] as? String == account }
                .sorted { ($0["event_sequence"] as? Int ?? 0) < ($1["event_sequence"] as? Int ?? 0) }
            return listed.count >= count && (listed.first?["attempts"] as? Int ?? 0) >= 1
        }
        return listed
    }

    @Test("an operator's cancel lets the waiting events go; an operator's retry sends the retrying one now and the rest after it")
    func operatorsUnblockAStream() async throws {
        let receiver = try await WebhookReceiver()
        try await TestEnvironment.withFresh { env in
            let (_, secret) = try await EndpointStore(pool: env.pool).create(url: receiver.url("/ok"), eventTypes: nil)
            try await receiver.setSecrets([secret.text])
            // Retries only after ten minutes: nothing but an operator moves these streams along.
            let schedule = RetrySchedule(delays: [600, 600])
            try await env.application(deliveryWorkers: 1, webhookGuard: Self.loopback, retrySchedule: schedule).testLive { client in
                try await failFirstThenSync(client, receiver, account: "alice",
                                            [TestReports.report("a1")], then: [TestReports.report("a2", revoked: 0)])
                let waiting = try await pendingDeliveries(env, account: "alice", count: 4)
                #expect(waiting.compactMap { $0["event_sequence"] as? Int } == [1, 2, 3, 4])
                #expect(waiting.first?["attempts"] as? Int == 1)
                #expect(waiting.dropFirst().allSatisfy { $0["attempts"] as? Int == 0 }, "the later events wait, unsent")
                let head = try #require(waiting.first?["delivery_id"] as? Int)

                var out = try await SubsyncCommand.run(["deliveries", "cancel", String(head)], env: env)
                #expect(out.status == 0, "\(out.stderr)")
                #expect(out.stdout.contains("delivery \(head) cancelled"))
                var entries = try await receiver.waitFor { entries in
                    Set(entries.filter { $0.status == 200 && $0.body?.data.accountID == "alice" }.compactMap(\.body?.data.sequence)) == [2, 3, 4]
                }
                #expect(Self.firstArrivals(entries)["/ok alice"] == [2, 3, 4])
                out = try await SubsyncCommand.run(["deliveries", "cancel", String(head)], env: env)
                #expect(out.status == 66 && out.stderr.contains("no pending delivery"))
                out = try await SubsyncCommand.run(["deliveries", "cancel", "not-a-number"], env: env)
                #expect(out.status == 64)
                out = try await SubsyncCommand.run(["deliveries", "cancel", "--help"], env: nil)
                #expect(out.status == 0 && out.stdout.contains("Example"))

                try await failFirstThenSync(client, receiver, account: "bob",
                                            [TestReports.report("b1")], then: [TestReports.report("b2", revoked: 0)])
                let bobs = try await pendingDeliveries(env, account: "bob", count: 4)
                let bobHead = try #require(bobs.first?["delivery_id"] as? Int)
                out = try await SubsyncCommand.run(["deliveries", "retry", String(bobHead)], env: env)
                #expect(out.status == 0, "\(out.stderr)")
                entries = try await receiver.waitFor { entries in
                    Set(entries.filter { $0.status == 200 && $0.body?.data.accountID == "bob" }.compactMap(\.body?.data.sequence)) == [1, 2, 3, 4]
                }
                #expect(Self.firstArrivals(entries)["/ok bob"] == [1, 2, 3, 4])
                #expect(Self.sentTooEarly(entries.filter { $0.body?.data.accountID == "bob" }) == [])
            }
        }
    }

    /// Inserts events of `account` with these sequence numbers, each with a delivery to `endpoint`.
    /// The outbox, with an endpoint nothing listens at: for tests that claim and record by hand.
    static func outbox(_ env: TestEnvironment) async throws -> (store: DeliveryStore, endpoint: WebhookEndpoint) {
        let (endpoint, _) = try await EndpointStore(pool: env.pool).create(url: "http://127.0.0.1:9/never", eventTypes: nil)
        return (DeliveryStore(pool: env.pool), endpoint)
    }

    /// Sender A's claim, and sender B's of the same streams after A's lease (60 s) ran out: A
    /// stalled past its lease.
    static func staleAndCurrentClaims(_ store: DeliveryStore, now: Date) async throws -> (stale: [DeliveryStore.Claimed], current: [DeliveryStore.Claimed]) {
        let stale = try await store.claimDue(limit: 10, lease: 60, now: now)
        let current = try await store.claimDue(limit: 10, lease: 60, now: now.addingTimeInterval(61))
        return (stale, current)
    }

    static func addDeliveries(_ env: TestEnvironment, endpoint: UUID, account: String, _ sequences: ClosedRange<Int>) async throws {
        for sequence in sequences {
            try await env.pool.query(
                """
                INSERT INTO events (account_id, sequence, event_id, type, occurred_at, payload)
                VALUES (\(account), \(sequence), gen_random_uuid(), 'entitlement.renewed', now(), '{}')
                """
            )
            try await env.pool.query(
                """
                INSERT INTO deliveries (account_id, endpoint_id, event_sequence, event_id)
                SELECT account_id, \(endpoint), sequence, event_id FROM events WHERE account_id = \(account) AND sequence = \(sequence)
                """
            )
        }
    }

    @Test("the outbox: one claim per stream at a time, waiting deliveries held and let go, in order")
    func streamBookkeeping() async throws {
        try await TestEnvironment.withFresh { env in
            let (store, endpoint) = try await Self.outbox(env)
            func add(_ sequences: ClosedRange<Int>) async throws {
                try await Self.addDeliveries(env, endpoint: endpoint.id, account: "sam", sequences)
            }
            func nextAttempts() async throws -> [Int: Date] {
                let rows = try await env.pool.query("SELECT event_sequence, next_attempt_at FROM deliveries WHERE status = 'pending'")
                return Dictionary(uniqueKeysWithValues: try rows.map { (try $0.decode(Int.self, at: 0), try $0.decode(Date.self, at: 1)) })
            }

            try await add(1...4)
            let first = try await store.claimDue(limit: 1, lease: 60)
            #expect(first.map(\.eventSequence) == [1, 2], "the head, and (limit 1) one delivery behind it")
            try await add(5...5)
            #expect(try await store.claimDue(limit: 10, lease: 60).isEmpty, "nothing of a stream while its head is out")

            // 2 (leased with 1), 3, 4 and 5 were due, read by every claim; now they wait for the lease.
            #expect(try await store.holdBlocked() == 4)
            var next = try await nextAttempts()
            let leaseEnd = try await env.pool.query("SELECT leased_until FROM deliveries WHERE event_sequence = 1")[0].decode(Date.self, at: 0)
            #expect(next[2] == leaseEnd && next[3] == leaseEnd && next[4] == leaseEnd && next[5] == leaseEnd)
            #expect(try await store.holdBlocked() == 0)

            // 1 went, 2 failed: everything behind 2 waits for its retry.
            let retryAt = Date().addingTimeInterval(3600)
            try await store.record([Self.attempt(first[0], .succeeded), Self.attempt(first[1], .retry, next: retryAt)], disableAfter: 86_400)
            next = try await nextAttempts()
            #expect(next[1] == nil)
            for sequence in 2...5 { #expect(abs((next[sequence] ?? .distantPast).timeIntervalSince(retryAt)) < 0.001, "\(sequence)") }
            #expect(try await store.claimDue(limit: 10, lease: 60).isEmpty)

            // An operator gives up on 2: the rest goes, in order, in one claim.
            #expect(try await store.cancel(deliveryID: first[1].deliveryID) == .cancelled)
            let rest = try await store.claimDue(limit: 10, lease: 60)
            #expect(rest.map(\.eventSequence) == [3, 4, 5])

            // 3 went, 4 died after its last attempt: 5, claimed but not sent, is let go at once.
            try await store.record([Self.attempt(rest[0], .succeeded), Self.attempt(rest[1], .dead)], disableAfter: 86_400)
            #expect(try await store.claimDue(limit: 10, lease: 60).map(\.eventSequence) == [5])
        }
    }

    /// Who holds: `holdBlocked`'s statement (one PostgreSQL), or the function Citus runs in its
    /// place (sql/0018), called here on one PostgreSQL: PL/pgSQL, the same answers expected.
    enum HoldForm: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case statement, citusFunction
        var testDescription: String { rawValue }
    }

    /// What the backend of a one-connection pool has read of `deliveries` so far: rows by
    /// sequential scans, and entries returned by its indexes (its counts, flushed when it goes
    /// idle after the first statement).
    static func deliveriesRead(_ env: TestEnvironment) async throws -> (sequentially: Int64, throughIndexes: Int64) {
        try await env.pool.query("SELECT pg_stat_force_next_flush()")
        let row = try await env.pool.query(
            """
            SELECT (SELECT seq_tup_read FROM pg_stat_user_tables WHERE relname = 'deliveries'),
                   (SELECT sum(idx_tup_read) FROM pg_stat_user_indexes WHERE relname = 'deliveries')::bigint
            """
        )
        return (try row.first?.decode(Int64.self, at: 0) ?? -1, try row.first?.decode(Int64.self, at: 1) ?? -1)
    }

    @Test("recording a batch looks its deliveries up by key, not by reading every pending delivery")
    func recordReadsByKey() async throws {
        // One connection, so the statistics read below are the record's backend's own.
        try await TestEnvironment.withFresh(poolSize: 1) { env in
            let (store, endpoint) = try await Self.outbox(env)
            // 20,000 pending deliveries in 5,000 streams (4 each), analyzed: the size at which the
            // planner, left alone, hashed all of them for each statement of a record.
            try await env.pool.query(
                """
                INSERT INTO events (account_id, sequence, event_id, type, occurred_at, payload)
                SELECT 'rk-' || a, s, gen_random_uuid(), 'entitlement.renewed', now(), '{}'
                FROM generate_series(1, 5000) a, generate_series(1, 4) s
                """
            )
            try await env.pool.query(
                "INSERT INTO deliveries (account_id, endpoint_id, event_sequence, event_id) SELECT account_id, \(endpoint.id), sequence, event_id FROM events"
            )
            try await env.pool.query("ANALYZE deliveries")
            // 500 heads, and 500 deliveries behind them.
            let claimed = try await store.claimDue(limit: 500, lease: 60)
            #expect(claimed.count == 1000)
            let before = try await Self.deliveriesRead(env).sequentially
            // Half succeed, half are retried later: both the status update and the hold-back of
            // what waits behind each stream have work to do.
            try await store.record(claimed.enumerated().map { index, claimed in
                DeliveryStore.AttemptResult(
                    accountID: claimed.accountID, deliveryID: claimed.deliveryID, endpointID: claimed.endpointID,
                    eventSequence: claimed.eventSequence, attempt: claimed.attempts + 1,
                    outcome: index.isMultiple(of: 2) ? .succeeded : .retry, nextAttemptAt: Date().addingTimeInterval(3600),
                    statusCode: index.isMultiple(of: 2) ? 200 : 500, latencyMilliseconds: 1, error: nil, responseExcerpt: nil,
                    attemptedAt: Date())
            }, disableAfter: 86_400)
            let read = try await Self.deliveriesRead(env).sequentially - before
            #expect(read < 20_000, "recording 1,000 deliveries read \(read) rows by sequential scans")
            // And it recorded: the successes are done, the retried ones wait.
            let counts = try await env.pool.query(
                "SELECT count(*) FILTER (WHERE status = 'succeeded'), count(*) FILTER (WHERE status = 'pending' AND attempts = 1) FROM deliveries"
            )
            #expect(try counts.first?.decode(Int64.self, at: 0) == 500)
            #expect(try counts.first?.decode(Int64.self, at: 1) == 500)
        }
    }

    @Test("recording a burst looks its deliveries up by key even when the statistics say almost nothing is pending")
    func recordReadsByKeyWithStaleStatistics() async throws {
        // One connection, so the statistics read below are the record's backend's own.
        try await TestEnvironment.withFresh(poolSize: 1) { env in
            let (store, endpoint) = try await Self.outbox(env)
            // A steady state, analyzed: 20,000 deliveries done. Then a burst of 3,000 (a replay,
            // a busy hour) that the next analyze has not seen (autovacuum is off for the table:
            // with sql/0029 it could analyze the burst within a minute).
            try await env.pool.query("ALTER TABLE deliveries SET (autovacuum_enabled = false)")
            try await env.pool.query(
                """
                INSERT INTO deliveries (account_id, endpoint_id, event_sequence, event_id, status)
                SELECT 'old-' || a, \(endpoint.id), 1, gen_random_uuid(), 'succeeded' FROM generate_series(1, 20000) a
                """
            )
            try await env.pool.query("ANALYZE deliveries")
            try await env.pool.query(
                """
                INSERT INTO deliveries (account_id, endpoint_id, event_sequence, event_id)
                SELECT 'new-' || a, \(endpoint.id), 1, gen_random_uuid() FROM generate_series(1, 3000) a
                """
            )
            let burst = try await env.pool.query("SELECT account_id, delivery_id FROM deliveries WHERE account_id LIKE 'new-%' ORDER BY delivery_id LIMIT 200")
            let results = try burst.map { row in
                DeliveryStore.AttemptResult(
                    accountID: try row.decode(String.self, at: 0), deliveryID: try row.decode(Int64.self, at: 1), endpointID: endpoint.id,
                    eventSequence: 1, attempt: 1, outcome: .succeeded, nextAttemptAt: Date(), statusCode: 200, latencyMilliseconds: 1,
                    error: nil, responseExcerpt: nil, attemptedAt: Date())
            }
            let before = try await Self.deliveriesRead(env)
            try await store.record(results, disableAfter: 86_400)
            let after = try await Self.deliveriesRead(env)
            let rowsRead = after.sequentially + after.throughIndexes - before.sequentially - before.throughIndexes
            // By key: an entry per result, and a probe per stream of what waits behind it.
            // Started from the partial index of pending deliveries (taken for a small one), the
            // status update would compare every pending delivery with every result
            // (docs/PERFORMANCE.md, *How a path's cost grows with its data*).
            #expect(rowsRead >= 200 && rowsRead < 1_000, "recording 200 deliveries read \(rowsRead) rows and index entries")
            let done = try await env.pool.query("SELECT count(*) FROM deliveries WHERE account_id LIKE 'new-%' AND status = 'succeeded'")
            #expect(try done.first?.decode(Int64.self, at: 0) == 200)
        }
    }

    @Test("holding looks at the due deliveries a claim reads first, a window of them, not at the whole backlog", arguments: HoldForm.allCases)
    func holdLooksAtAWindow(form: HoldForm) async throws {
        try await TestEnvironment.withFresh { env in
            let store = DeliveryStore(pool: env.pool)
            /// `window` nil: the default window (the function's three-argument form of sql/0014).
            func hold(window: Int? = nil) async throws -> Int {
                switch form {
                case .statement:
                    return try await store.holdBlocked(window: window ?? DeliveryStore.holdWindow)
                case .citusFunction:
                    let now = Date()
                    let query: PostgresQuery =
                        if let window { "SELECT subsync_hold_blocked_deliveries(\(now), 0, 1, \(window))" } else {
                            "SELECT subsync_hold_blocked_deliveries(\(now), 0, 1)"
                        }
                    let result = try await env.pool.query(query)
                    return try result[0].decode(Int.self, at: 0)
                }
            }
            let (endpoint, _) = try await EndpointStore(pool: env.pool).create(url: "http://127.0.0.1:9/never", eventTypes: nil)
            for account in ["ann", "bob", "cy"] {
                try await Self.addDeliveries(env, endpoint: endpoint.id, account: account, 1...2)
            }
            // A disabled endpoint's deliveries stay due, older than all: claims do not read
            // them, and they must not take the window.
            let (disabled, _) = try await EndpointStore(pool: env.pool).create(url: "http://127.0.0.1:9/off", eventTypes: nil)
            try await Self.addDeliveries(env, endpoint: disabled.id, account: "zed", 1...3)
            try await env.pool.query("UPDATE webhook_endpoints SET enabled = false WHERE endpoint_id = \(disabled.id)")
            // Strictly ordered due times: zed's, then ann1, ann2, bob1, bob2, cy1, cy2.
            try await env.pool.query(
                """
                UPDATE deliveries SET next_attempt_at = now() - interval '1 hour'
                    + (CASE account_id WHEN 'zed' THEN -10 WHEN 'ann' THEN 0 WHEN 'bob' THEN 2 ELSE 4 END + event_sequence) * interval '1 second'
                """
            )
            // One sender has every stream: the heads and the deliveries behind them are leased,
            // and the deliveries behind the heads are still due, so claims would read them.
            #expect(try await store.claimDue(limit: 10, lease: 3600).count == 6)
            func due(_ account: String) async throws -> Int {
                try await env.pool.query(
                    "SELECT count(*) FROM deliveries WHERE account_id = \(account) AND event_sequence = 2 AND next_attempt_at <= now()"
                )[0].decode(Int.self, at: 0)
            }
            #expect(try await hold(window: 2) == 1, "ann1 and ann2: ann2 waits for the lease")
            #expect(try await due("ann") == 0)
            #expect(try await due("bob") == 1, "beyond the window")
            #expect(try await due("cy") == 1, "beyond the window")
            #expect(try await hold(window: 2) == 0, "ann1 and bob1: two heads, nothing behind them in the window")
            #expect(try await hold(window: 3) == 1, "ann1, bob1, bob2")
            #expect(try await due("bob") == 0)
            #expect(try await due("cy") == 1)
            #expect(try await hold() == 1)
            #expect(try await due("cy") == 0)
        }
    }

    @Test("an operator's retry or cancel while a stream is out with a sender does not let a second sender overtake it")
    func operatorCannotBreakALease() async throws {
        try await TestEnvironment.withFresh { env in
            let (store, endpoint) = try await Self.outbox(env)
            for account in ["ann", "bob"] {
                try await Self.addDeliveries(env, endpoint: endpoint.id, account: account, 1...2)
            }

            // Sender A takes both streams, each head with the delivery behind it.
            let a = try await store.claimDue(limit: 10, lease: 60)
            #expect(a.map { "\($0.accountID)\($0.eventSequence)" } == ["ann1", "ann2", "bob1", "bob2"])
            let ann1 = try #require(a.first { $0.accountID == "ann" && $0.eventSequence == 1 })
            let bob1 = try #require(a.first { $0.accountID == "bob" && $0.eventSequence == 1 })

            // While A sends, an operator tries to cancel ann's head and retries bob's. The cancel
            // is refused, and changes nothing: ann1 may be on the wire, and a claim asks whether
            // a stream is out of its pending deliveries (sql/0026).
            #expect(try await store.cancel(deliveryID: ann1.deliveryID) == .beingSent(until: ann1LeaseEnd(env)))
            #expect(try await store.retry(deliveryID: bob1.deliveryID) == 1)
            // Sender B gets nothing: ann2 must not go out while ann1 may still be on the wire, and
            // bob1 is not sent twice at once. Nor does a new event of ann's.
            try await Self.addDeliveries(env, endpoint: endpoint.id, account: "ann", 3...3)
            #expect(try await store.claimDue(limit: 10, lease: 60).isEmpty)
            #expect(try await store.holdBlocked() >= 0)
            #expect(try await store.claimDue(limit: 10, lease: 60).isEmpty)

            // A finishes and records: everything it sent succeeded; ann3 goes next.
            try await store.record(a.map { Self.attempt($0, .succeeded) }, disableAfter: 86_400)
            let statuses = try await env.pool.query("SELECT account_id || event_sequence, status, leased_until IS NULL FROM deliveries ORDER BY 1")
                .map { "\(try $0.decode(String.self, at: 0))=\(try $0.decode(String.self, at: 1)),\(try $0.decode(Bool.self, at: 2))" }
            #expect(statuses == ["ann1=succeeded,true", "ann2=succeeded,true", "ann3=pending,true", "bob1=succeeded,true", "bob2=succeeded,true"])
            let next = try await store.claimDue(limit: 10, lease: 60)
            #expect(next.map { "\($0.accountID)\($0.eventSequence)" } == ["ann3"])
            // Out with a sender again: refused; once recorded as failed (retrying), cancelled.
            let ann3 = try #require(next.first)
            #expect(try await store.cancel(deliveryID: ann3.deliveryID) != .cancelled)
            try await store.record([DeliveryStore.AttemptResult(
                accountID: ann3.accountID, deliveryID: ann3.deliveryID, endpointID: ann3.endpointID, eventSequence: ann3.eventSequence,
                attempt: 1, outcome: .retry, nextAttemptAt: Date().addingTimeInterval(3600), statusCode: 500, latencyMilliseconds: 1,
                error: nil, responseExcerpt: nil, attemptedAt: Date())], disableAfter: 86_400)
            #expect(try await store.cancel(deliveryID: ann3.deliveryID) == .cancelled)
            #expect(try await store.cancel(deliveryID: ann3.deliveryID) == .notPending)
        }
    }

    /// When ann's head's lease ends, as the claim wrote it.
    private func ann1LeaseEnd(_ env: TestEnvironment) async throws -> Date {
        try await env.pool.query("SELECT leased_until FROM deliveries WHERE account_id = 'ann' AND event_sequence = 1")[0].decode(Date.self, at: 0)
    }

    /// The attempt at `claimed` with `outcome`, as a delivery loop makes it (its `endsStream`
    /// copied from the claim).
    static func attempt(
        _ claimed: DeliveryStore.Claimed, _ outcome: DeliveryStore.AttemptResult.Outcome, next: Date = Date()
    ) -> DeliveryStore.AttemptResult {
        DeliveryStore.AttemptResult(
            accountID: claimed.accountID, deliveryID: claimed.deliveryID, endpointID: claimed.endpointID,
            eventSequence: claimed.eventSequence, attempt: claimed.attempts + 1, outcome: outcome, nextAttemptAt: next,
            statusCode: outcome == .succeeded ? 200 : 500, latencyMilliseconds: 1, error: nil, responseExcerpt: nil,
            attemptedAt: Date(), endsStream: claimed.endsStream)
    }

    @Test("a claim marks the last delivery of each stream it took whole, and no stream a limit may have cut short")
    func claimMarksStreamEnds() async throws {
        try await TestEnvironment.withFresh { env in
            let (store, endpoint) = try await Self.outbox(env)
            try await Self.addDeliveries(env, endpoint: endpoint.id, account: "ann", 1...3)
            try await Self.addDeliveries(env, endpoint: endpoint.id, account: "bob", 1...1)
            // Three followers at most: ann's two and bob's none are all there were.
            let whole = try await store.claimDue(limit: 3, lease: 60)
            #expect(whole.map { "\($0.accountID)\($0.eventSequence):\($0.endsStream)" } == ["ann1:false", "ann2:false", "ann3:true", "bob1:true"])
            try await store.release(whole)

            // Two followers in all: ann3 may not have been the last, and so may bob1.
            let cut = try await store.claimDue(limit: 2, lease: 60)
            #expect(cut.map { "\($0.accountID)\($0.eventSequence):\($0.endsStream)" } == ["ann1:false", "ann2:false", "ann3:false", "bob1:false"])
            try await store.release(cut)

            // A stream with as many behind its head as a stream may bring: it may go on.
            try await Self.addDeliveries(env, endpoint: endpoint.id, account: "cy", 1...(DeliveryStore.maximumFollowersPerStream + 1))
            let long = try await store.claimDue(limit: 500, lease: 60)
            #expect(long.filter { $0.accountID == "cy" }.count == DeliveryStore.maximumFollowersPerStream + 1)
            #expect(long.filter(\.endsStream).map { "\($0.accountID)\($0.eventSequence)" } == ["ann3", "bob1"])
        }
    }

    @Test("a stream that ends lets go at once what waited for its lease, and a retried one holds it for the retry")
    func streamEndLetsGoWhatWaitedForTheLease() async throws {
        try await TestEnvironment.withFresh { env in
            let (store, endpoint) = try await Self.outbox(env)
            try await Self.addDeliveries(env, endpoint: endpoint.id, account: "ann", 1...2)
            try await Self.addDeliveries(env, endpoint: endpoint.id, account: "bob", 1...1)
            let claimed = try await store.claimDue(limit: 10, lease: 600)
            #expect(claimed.map { "\($0.accountID)\($0.eventSequence):\($0.endsStream)" } == ["ann1:false", "ann2:true", "bob1:true"])
            let lease = try #require(claimed.first?.leasedUntil)
            // As stored (to the microsecond).
            let leaseEnd = try await env.pool.query("SELECT leased_until FROM deliveries WHERE account_id = 'bob'")[0].decode(Date.self, at: 0)
            #expect(abs(leaseEnd.timeIntervalSince(lease)) < 0.001)

            // New events while the streams are out: held until the lease ends.
            try await Self.addDeliveries(env, endpoint: endpoint.id, account: "ann", 3...4)
            try await Self.addDeliveries(env, endpoint: endpoint.id, account: "bob", 2...2)
            #expect(try await store.holdBlocked() == 4, "ann2 (claimed with ann1), ann3, ann4, bob2")
            func waitsUntil(_ account: String, _ sequence: Int) async throws -> Date {
                try await env.pool.query(
                    "SELECT next_attempt_at FROM deliveries WHERE account_id = \(account) AND event_sequence = \(sequence)"
                )[0].decode(Date.self, at: 0)
            }
            #expect(try await waitsUntil("ann", 3) == leaseEnd)
            #expect(try await waitsUntil("bob", 2) == leaseEnd)

            // ann's stream ends (both succeeded): ann3 and ann4 go now, not in ten minutes. bob1
            // is retried: bob2 waits for that retry.
            let retryAt = Date().addingTimeInterval(3600)
            try await store.record(
                [Self.attempt(claimed[0], .succeeded), Self.attempt(claimed[1], .succeeded), Self.attempt(claimed[2], .retry, next: retryAt)],
                lease: lease, disableAfter: 86_400)
            #expect(try await waitsUntil("ann", 3) <= Date())
            #expect(try await waitsUntil("ann", 4) <= Date())
            #expect(abs(try await waitsUntil("bob", 2).timeIntervalSince(retryAt)) < 0.001)
            let next = try await store.claimDue(limit: 10, lease: 600)
            #expect(next.map { "\($0.accountID)\($0.eventSequence)" } == ["ann3", "ann4"])
            let leases = try await env.pool.query("SELECT count(*) FROM deliveries WHERE leased_until IS NOT NULL")[0].decode(Int.self, at: 0)
            #expect(leases == 2, "only the new claim's")
        }
    }

    @Test("a claim's lease is written in place: no index holds leased_until, so the update is heap-only")
    func leaseIsAHeapOnlyUpdate() async throws {
        // One connection, so the statistics read below are the claim's backend's own.
        try await TestEnvironment.withFresh(poolSize: 1) { env in
            let (store, endpoint) = try await Self.outbox(env)
            try await env.pool.query(
                """
                INSERT INTO events (account_id, sequence, event_id, type, occurred_at, payload)
                SELECT 'hot-' || a, 1, gen_random_uuid(), 'entitlement.renewed', now(), '{}' FROM generate_series(1, 2000) a
                """
            )
            try await env.pool.query(
                "INSERT INTO deliveries (account_id, endpoint_id, event_sequence, event_id) SELECT account_id, \(endpoint.id), sequence, event_id FROM events"
            )
            func updates() async throws -> (all: Int64, heapOnly: Int64) {
                try await env.pool.query("SELECT pg_stat_force_next_flush()")
                let row = try await env.pool.query("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'deliveries'")[0]
                return (try row.decode(Int64.self, at: 0), try row.decode(Int64.self, at: 1))
            }
            let before = try await updates()
            // One of four delivery loops' claims, as a server makes them.
            let claimed = try await store.claimDue(limit: 500, lease: 60, partition: (0, 4))
            #expect(claimed.count > 300)
            let after = try await updates()
            #expect(after.all - before.all == Int64(claimed.count))
            // With an index on leased_until (sql/0008), none was; a page without room makes one
            // a new version with index entries, so "most" rather than "all".
            #expect((after.heapOnly - before.heapOnly) * 2 > Int64(claimed.count), "\(after.heapOnly - before.heapOnly) of \(claimed.count) leases were heap-only updates")
        }
    }

    @Test("a sender that dies only delays its streams: after the lease they are claimed again, in order")
    func expiredLeaseIsClaimedAgain() async throws {
        try await TestEnvironment.withFresh { env in
            let (store, endpoint) = try await Self.outbox(env)
            try await Self.addDeliveries(env, endpoint: endpoint.id, account: "cy", 1...2)
            let now = Date()
            #expect(try await store.claimDue(limit: 10, lease: 60, now: now).map(\.eventSequence) == [1, 2])
            #expect(try await store.claimDue(limit: 10, lease: 60, now: now.addingTimeInterval(59)).isEmpty)
            let again = try await store.claimDue(limit: 10, lease: 60, now: now.addingTimeInterval(61))
            #expect(again.map(\.eventSequence) == [1, 2])
            // A sender that gives its claim back unsent (it could not start in time): the
            // stream can be claimed again at once, not only after the lease.
            try await store.release(again)
            #expect(try await store.claimDue(limit: 10, lease: 60, now: now.addingTimeInterval(62)).map(\.eventSequence) == [1, 2])
        }
    }

    @Test("a sender that outlived its lease records its attempts but leaves the stream to the sender that claimed it after")
    func staleSenderLeavesTheNewLeaseAlone() async throws {
        try await TestEnvironment.withFresh { env in
            let (store, endpoint) = try await Self.outbox(env)
            try await Self.addDeliveries(env, endpoint: endpoint.id, account: "eve", 1...2)
            // A claims, stalls past its lease; B claims the stream again.
            let now = Date()
            let (a, b) = try await Self.staleAndCurrentClaims(store, now: now)
            #expect(a.map(\.eventSequence) == [1, 2] && b.map(\.eventSequence) == [1, 2])
            // A wakes up: its attempts are logged, but the deliveries are B's to record, and
            // neither its record nor its release ends B's lease.
            try await store.record(a.map { Self.attempt($0, .succeeded) }, lease: a[0].leasedUntil, disableAfter: 86_400)
            try await store.release(a)
            let rows = try await env.pool.query(
                "SELECT status, leased_until FROM deliveries WHERE account_id = 'eve' ORDER BY event_sequence"
            ).map { (try $0.decode(String.self, at: 0), try $0.decode(Date?.self, at: 1)) }
            #expect(rows.map(\.0) == ["pending", "pending"])
            #expect(rows.allSatisfy { $0.1.map { abs($0.timeIntervalSince(b[0].leasedUntil)) < 0.001 } ?? false }, "B's lease stands")
            #expect(try await env.scalar("SELECT count(*) FROM delivery_attempts WHERE account_id = 'eve'") == 2)
            #expect(try await store.claimDue(limit: 10, lease: 60, now: now.addingTimeInterval(62)).isEmpty)
            // B records. Taking its attempts for new ones (a delivery loop's first try at a round)
            // fails on A's, and changes nothing; keeping what A logged, it is done.
            await #expect(throws: PostgresError.self) {
                try await store.record(b.map { Self.attempt($0, .succeeded) }, lease: b[0].leasedUntil, disableAfter: 86_400, onlyNewAttempts: true)
            }
            #expect(try await env.scalar("SELECT count(*) FROM deliveries WHERE account_id = 'eve' AND status = 'pending' AND leased_until IS NOT NULL") == 2)
            try await store.record(b.map { Self.attempt($0, .succeeded) }, lease: b[0].leasedUntil, disableAfter: 86_400)
            #expect(try await env.scalar("SELECT count(*) FROM deliveries WHERE account_id = 'eve' AND status = 'succeeded' AND leased_until IS NULL") == 2)
        }
    }

    @Test("a sender that outlived its lease and failed holds nothing back of the stream another sender has now")
    func staleFailureHoldsNothingBack() async throws {
        try await TestEnvironment.withFresh { env in
            let (store, endpoint) = try await Self.outbox(env)
            try await Self.addDeliveries(env, endpoint: endpoint.id, account: "eve", 1...1)
            // A claims, stalls past its lease; B claims the stream again; a new event comes.
            let now = Date()
            let (a, b) = try await Self.staleAndCurrentClaims(store, now: now)
            #expect(a.count == 1 && b.count == 1)
            try await Self.addDeliveries(env, endpoint: endpoint.id, account: "eve", 2...2)
            // A's attempt failed: its retry, in an hour, is not B's stream's business.
            try await store.record(
                [Self.attempt(a[0], .retry, next: now.addingTimeInterval(3600))], lease: a[0].leasedUntil, disableAfter: 86_400)
            #expect(try await env.scalar("SELECT count(*) FROM deliveries WHERE account_id = 'eve' AND next_attempt_at <= now()") == 2)
            // B's succeeded: the stream moves on to eve2 now.
            try await store.record([Self.attempt(b[0], .succeeded)], lease: b[0].leasedUntil, disableAfter: 86_400)
            let next = try await store.claimDue(limit: 10, lease: 60, now: now.addingTimeInterval(62))
            #expect(next.map { "\($0.accountID)\($0.eventSequence)" } == ["eve2"])
        }
    }

    @Test("two processes' delivery loops against flaky endpoints: every stream complete and in order", arguments: [1, 2])
    func concurrentSendersKeepOrder(round: Int) async throws {
        let receiver = try await WebhookReceiver()
        let accounts = 40
        let eventsPerAccount = 8
        try await TestEnvironment.withFresh { env in
            let endpoints = EndpointStore(pool: env.pool)
            let (_, flakySecret) = try await endpoints.create(url: receiver.url("/chaos/35"), eventTypes: nil)
            let (_, steadySecret) = try await endpoints.create(url: receiver.url("/chaos/5"), eventTypes: nil)
            try await receiver.setSecrets([flakySecret.text, steadySecret.text])
            try await env.pool.query(
                """
                INSERT INTO events (account_id, sequence, event_id, type, occurred_at, payload)
                SELECT account_id, sequence, id, 'entitlement.renewed', now(),
                       jsonb_build_object('id', id, 'account_id', account_id, 'sequence', sequence)
                FROM (SELECT 'order-' || a AS account_id, s AS sequence, gen_random_uuid() AS id
                      FROM generate_series(1, \(accounts)) a, generate_series(1, \(eventsPerAccount)) s) generated
                """
            )
            try await env.pool.query(
                """
                INSERT INTO deliveries (account_id, endpoint_id, event_sequence, event_id)
                SELECT e.account_id, w.endpoint_id, e.sequence, e.event_id
                FROM events e CROSS JOIN webhook_endpoints w ORDER BY e.account_id, e.sequence
                """
            )

            // Two "processes", each with its own pool and two loops splitting the accounts.
            var configuration = DeliveryWorker.Configuration()
            configuration.batchSize = 16
            configuration.schedule = RetrySchedule(delays: Array(repeating: 0.05, count: 60))
            configuration.pollInterval = .milliseconds(50)
            let pools = (0..<2).map { _ in ConnectionPool(configuration: .init(connection: env.connection, maximumConnections: 4, leaseTimeout: .seconds(600))) }
            var workers: [any Service] = []
            for pool in pools {
                // Each "process" listens once for both of its loops, as `serve` does.
                let wakeups = WakeSignal()
                workers.append(
                    NotificationForwarder(
                        configuration: env.connection, routes: [Outbox.deliveriesChannel: wakeups], logger: env.logger))
                for index in 0..<2 {
                    configuration.partition = (index, 2)
                    workers.append(
                        DeliveryWorker(
                            store: DeliveryStore(pool: pool),
                            client: CurlClient(configuration: .init(addressGuard: Self.loopback ?? .publicOnly)),
                            wakeups: wakeups,
                            configuration: configuration,
                            logger: env.logger
                        )
                    )
                }
            }
            let group = ServiceGroup(configuration: .init(services: workers, logger: env.logger))
            var pending = -1
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                let deadline = Date().addingTimeInterval(900)
                while Date() < deadline {
                    pending = try await env.pool.query("SELECT count(*) FROM deliveries WHERE status = 'pending'")[0].decode(Int.self, at: 0)
                    if pending == 0 { break }
                    try await Task.sleep(for: .milliseconds(100))
                }
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
            }
            for pool in pools { await pool.close() }

            #expect(pending == 0, "deliveries still pending after 900 s")
            let statuses = try await env.pool.query("SELECT status, count(*) FROM deliveries GROUP BY status")
                .map { (try $0.decode(String.self, at: 0), try $0.decode(Int.self, at: 1)) }
            #expect(statuses.map(\.0) == ["succeeded"], "\(statuses)")

            let entries = try await receiver.entries()
            #expect(entries.allSatisfy { !$0.verifiedBy.isEmpty })
            let violations = Self.sentTooEarly(entries)
            #expect(violations.isEmpty, "\(violations.prefix(5))")
            let arrivals = Self.firstArrivals(entries)
            #expect(arrivals.count == accounts * 2)
            for (stream, sequences) in arrivals {
                #expect(sequences == Array(1...eventsPerAccount), "\(stream)")
            }
            // The holding back was exercised: events other than an account's last failed.
            let heldBack = entries.filter { $0.status == 500 && ($0.body?.data.sequence ?? eventsPerAccount) < eventsPerAccount }
            #expect(heldBack.count > 10)
        }
    }
}
