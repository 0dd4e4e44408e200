import Curl
import Foundation
import Postgres
@testable import SyncService
import SyncStore
import TestSupport
import Testing

/// A sender's round against a receiver that does not answer in time, end to end: the real
/// worker, the real HTTP loop with its per-host queue, a real receiver (Tests/Doubles/webhook-receiver.py)
/// and PostgreSQL. The per-request half (`CurlRequest.startBy`) and the release are tested on
/// their own in CurlClientTests and WebhookOrderTests; this checks that they add up to what the
/// lease needs.
@Suite("Webhook leases: a receiver that does not answer")
struct DeliveryLeaseTests {
    /// `count` streams of one delivery each (accounts `name-1`, `name-2`, ...) to an endpoint at
    /// `path` on the receiver, which is told its secret.
    static func streams(_ count: Int, named name: String, to receiver: WebhookReceiver, path: String, in env: TestEnvironment) async throws {
        let (endpoint, secret) = try await EndpointStore(pool: env.pool).create(url: receiver.url(path), eventTypes: nil)
        try await receiver.setSecrets([secret.text])
        try await env.pool.query(
            """
            INSERT INTO events (account_id, sequence, event_id, type, occurred_at, payload)
            SELECT \(name) || '-' || a, 1, id, 'entitlement.renewed', now(), json_build_object('id', id, 'account_id', \(name) || '-' || a, 'sequence', 1)
            FROM generate_series(1, \(count)) a, LATERAL (SELECT gen_random_uuid() AS id) generated
            """
        )
        try await env.pool.query(
            "INSERT INTO deliveries (account_id, endpoint_id, event_sequence, event_id) SELECT account_id, \(endpoint.id), sequence, event_id FROM events"
        )
    }

    /// A delivery loop whose HTTP client sends two requests at a time to a receiver.
    static func worker(_ configuration: DeliveryWorker.Configuration, in env: TestEnvironment) -> DeliveryWorker {
        DeliveryWorker(
            store: DeliveryStore(pool: env.pool),
            client: CurlClient(configuration: .init(addressGuard: WebhookOrderTests.loopback ?? .publicOnly, maximumConnectionsPerHost: 2)),
            configuration: configuration,
            logger: env.logger
        )
    }

    @Test("attempts that could not start before the lease allowed are not sent, and their streams are given back at once")
    func unstartedStreamsAreGivenBack() async throws {
        try await TestEnvironment.withFresh { env in
            let receiver = try await WebhookReceiver()
            defer { receiver.stop() }
            // Every request takes the receiver 2.5 s; the sender gives up after 1 s.
            let streams = 24
            try await Self.streams(streams, named: "lease", to: receiver, path: "/slow/2500", in: env)

            // Two transfers at a time to the receiver, each held for its 1 s timeout: the queue
            // holds the rest. The lease (10 s) lets attempts start for 10 - 2 × 1 - 5 = 3 s.
            var configuration = DeliveryWorker.Configuration()
            configuration.totalTimeout = .seconds(1)
            configuration.connectTimeout = .seconds(1)
            configuration.lease = 10
            // A failed attempt is retried in an hour: only the streams given back are due after it.
            configuration.schedule = RetrySchedule(delays: [3_600])
            let worker = Self.worker(configuration, in: env)
            let claimedAt = Date()
            #expect(try await worker.deliverBatch() == streams)

            // Each stream was either attempted (one failed attempt recorded, retried later) or
            // given back whole: due now, no attempt counted, no lease.
            let rows = try await env.pool.query(
                """
                SELECT d.attempts, d.leased_until IS NULL, d.next_attempt_at <= now(), count(a.attempt)
                FROM deliveries d LEFT JOIN delivery_attempts a USING (account_id, delivery_id)
                WHERE d.status = 'pending' GROUP BY d.account_id, d.delivery_id
                """
            ).map { (try $0.decode(Int.self, at: 0), try $0.decode(Bool.self, at: 1), try $0.decode(Bool.self, at: 2), try $0.decode(Int.self, at: 3)) }
            #expect(rows.count == streams)
            let attempted = rows.filter { $0.0 == 1 }
            let givenBack = rows.filter { $0.0 == 0 }
            #expect(attempted.count + givenBack.count == streams)
            #expect(attempted.allSatisfy { $0.1 && !$0.2 && $0.3 == 1 }, "attempted: lease ended, retry later, one attempt recorded")
            #expect(givenBack.allSatisfy { $0.1 && $0.2 && $0.3 == 0 }, "given back: no lease, due now, nothing recorded")
            // Two at a time for about 3 s: some started, and most could not (without `startBy`
            // all 24 would have gone out, the last ones about 11 s after the claim).
            #expect(attempted.count >= 2)
            #expect(givenBack.count >= 1)

            // The streams given back are claimed again now, not when the lease would have ended.
            // (The attempted ones wait for their retry, in an hour.)
            let again = try await DeliveryStore(pool: env.pool).claimDue(limit: 100, lease: 60)
            #expect(Set(again.map(\.accountID)) == Set(try await env.pool.query(
                "SELECT account_id FROM deliveries WHERE attempts = 0"
            ).map { try $0.decode(String.self, at: 0) }))
            #expect(again.count == givenBack.count)

            // The receiver saw exactly the attempts, all of them started while the lease had time
            // for them (it logs a request when its 2.5 s are over).
            let entries = try await receiver.waitFor { $0.count >= attempted.count }
            try await Task.sleep(for: .seconds(4))
            let all = try await receiver.entries()
            #expect(all.count == entries.count, "a request not counted as an attempt reached the receiver")
            #expect(all.count == attempted.count)
            for entry in all {
                let arrived = Date(timeIntervalSince1970: entry.receivedAt - 2.5)
                #expect(arrived.timeIntervalSince(claimedAt) < 10 - 1, "a request started too late for its lease: \(arrived.timeIntervalSince(claimedAt)) s after the claim")
                #expect(entry.verifiedBy == [0])
            }

        }
    }

    @Test("a round cut short (the loop stopping) counts no attempt for what it had out or queued, and gives the streams back")
    func cancelledRoundCountsNoAttempt() async throws {
        try await TestEnvironment.withFresh { env in
            let receiver = try await WebhookReceiver()
            defer { receiver.stop() }
            // The receiver takes 30 s a request: nothing is answered before the round is cut.
            let streams = 6
            try await Self.streams(streams, named: "cut", to: receiver, path: "/slow/30000", in: env)
            var configuration = DeliveryWorker.Configuration()
            configuration.totalTimeout = .seconds(60)
            configuration.lease = 600
            configuration.schedule = RetrySchedule(delays: [3_600])
            // Two out at a time, four waiting in the HTTP loop's queue.
            let worker = Self.worker(configuration, in: env)
            let round = Task { try await worker.deliverBatch() }
            // The claim leased every stream; then the round is cut, as a graceful shutdown does.
            _ = try await waitUntil {
                try await env.scalar("SELECT count(*) FROM deliveries WHERE leased_until IS NOT NULL") == streams
            }
            try await Task.sleep(for: .milliseconds(500))
            let cutAt = ContinuousClock.now
            round.cancel()
            #expect(try await round.value == streams)
            #expect(ContinuousClock.now - cutAt < .seconds(25), "the round ended long before the receiver's 30 s")

            // No attempt recorded or counted, nothing retried later: every stream is due now, unleased.
            #expect(try await env.scalar("SELECT count(*) FROM delivery_attempts") == 0)
            let rows = try await env.pool.query(
                "SELECT attempts, leased_until IS NULL, next_attempt_at <= now(), status FROM deliveries"
            ).map { (try $0.decode(Int.self, at: 0), try $0.decode(Bool.self, at: 1), try $0.decode(Bool.self, at: 2), try $0.decode(String.self, at: 3)) }
            #expect(rows.count == streams)
            #expect(rows.allSatisfy { $0.0 == 0 && $0.1 && $0.2 && $0.3 == "pending" }, "\(rows)")
            #expect(try await DeliveryStore(pool: env.pool).claimDue(limit: 100, lease: 60).count == streams)
        }
    }

    @Test("a round the database refuses to record at once is recorded delivery by delivery: every delivery done once, none sent again")
    func refusedRoundIsRecordedOneByOne() async throws {
        try await TestEnvironment.withFresh { env in
            let receiver = try await WebhookReceiver()
            defer { receiver.stop() }
            let (endpoint, secret) = try await EndpointStore(pool: env.pool).create(url: receiver.url("/ok"), eventTypes: nil)
            try await receiver.setSecrets([secret.text])
            // A stream of three events, and one of one.
            try await env.pool.query(
                """
                INSERT INTO events (account_id, sequence, event_id, type, occurred_at, payload)
                SELECT account, s, id, 'entitlement.renewed', now(), json_build_object('id', id, 'account_id', account, 'sequence', s)
                FROM (SELECT account, s, gen_random_uuid() AS id FROM (VALUES ('three', 1), ('three', 2), ('three', 3), ('one', 1)) AS v(account, s)) e
                """
            )
            try await env.pool.query(
                "INSERT INTO deliveries (account_id, endpoint_id, event_sequence, event_id) SELECT account_id, \(endpoint.id), sequence, event_id FROM events"
            )
            // The database refuses the attempt at the stream's second event with the receiver's
            // answer in it: the round's record fails, then that attempt's own, which is then
            // recorded without the answer.
            try await env.pool.query(
                """
                CREATE FUNCTION refuse_second() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF NEW.account_id = 'three' AND NEW.response_excerpt IS NOT NULL
                       AND NEW.delivery_id = (SELECT delivery_id FROM deliveries WHERE account_id = 'three' AND event_sequence = 2) THEN
                        RAISE EXCEPTION 'refused for the test';
                    END IF;
                    RETURN NEW;
                END $$
                """
            )
            try await env.pool.query(
                "CREATE TRIGGER refuse_second BEFORE INSERT ON delivery_attempts FOR EACH ROW EXECUTE FUNCTION refuse_second()"
            )
            let worker = Self.worker(DeliveryWorker.Configuration(), in: env)
            #expect(try await worker.deliverBatch() == 4)

            // Every delivery done, its lease ended, one attempt each; the refused one without
            // the answer.
            let rows = try await env.pool.query(
                """
                SELECT d.account_id || d.event_sequence, d.status, d.attempts, d.leased_until IS NULL, count(a.attempt), bool_and(a.response_excerpt IS NULL)
                FROM deliveries d LEFT JOIN delivery_attempts a USING (account_id, delivery_id)
                GROUP BY d.account_id, d.delivery_id ORDER BY 1
                """
            ).map {
                "\(try $0.decode(String.self, at: 0)) \(try $0.decode(String.self, at: 1)) \(try $0.decode(Int.self, at: 2))"
                    + " \(try $0.decode(Bool.self, at: 3)) \(try $0.decode(Int.self, at: 4)) \(try $0.decode(Bool.self, at: 5))"
            }
            #expect(rows == [
                "one1 succeeded 1 true 1 false", "three1 succeeded 1 true 1 false", "three2 succeeded 1 true 1 true",
                "three3 succeeded 1 true 1 false",
            ])
            // Nothing is sent again: the receiver got each event once.
            #expect(try await worker.deliverBatch() == 0)
            let entries = try await receiver.waitFor { $0.count >= 4 }
            #expect(entries.count == 4)
            #expect(Set(entries.compactMap { $0.id }).count == 4)
        }
    }

    @Test("an operator's retry starts the retry schedule again, and every attempt keeps its own number in the delivery's history")
    func retryKeepsTheHistory() async throws {
        try await TestEnvironment.withFresh { env in
            let receiver = try await WebhookReceiver()
            defer { receiver.stop() }
            // 500 for the first three requests of the event, then 200.
            let (endpoint, secret) = try await EndpointStore(pool: env.pool).create(url: receiver.url("/flaky/3"), eventTypes: nil)
            try await receiver.setSecrets([secret.text])
            try await env.pool.query(
                """
                INSERT INTO events (account_id, sequence, event_id, type, occurred_at, payload)
                SELECT 'again', 1, id, 'entitlement.renewed', now(), json_build_object('id', id, 'account_id', 'again', 'sequence', 1)
                FROM (SELECT gen_random_uuid() AS id) generated
                """
            )
            try await env.pool.query(
                "INSERT INTO deliveries (account_id, endpoint_id, event_sequence, event_id) SELECT account_id, \(endpoint.id), sequence, event_id FROM events"
            )
            // Two attempts in all, the second due at once.
            var configuration = DeliveryWorker.Configuration()
            configuration.schedule = RetrySchedule(delays: [0], jitter: 0)
            let worker = Self.worker(configuration, in: env)
            let store = DeliveryStore(pool: env.pool)
            func history() async throws -> [String] {
                try await env.pool.query(
                    "SELECT attempt, status_code FROM delivery_attempts WHERE account_id = 'again' ORDER BY attempt"
                ).map { "\(try $0.decode(Int.self, at: 0)):\(try $0.decode(Int.self, at: 1))" }
            }
            func delivery() async throws -> String {
                let row = try await env.pool.query("SELECT status, attempts FROM deliveries WHERE account_id = 'again'")[0]
                return "\(try row.decode(String.self, at: 0)) \(try row.decode(Int.self, at: 1))"
            }

            #expect(try await worker.deliverBatch() == 1)
            #expect(try await worker.deliverBatch() == 1)
            #expect(try await delivery() == "dead 2")
            #expect(try await history() == ["1:500", "2:500"])

            // Retried: the third attempt fails too, and is the first of a fresh schedule (retried,
            // not dead); the fourth succeeds. Each is in the history under its own number.
            let id = try await env.pool.query("SELECT delivery_id FROM deliveries WHERE account_id = 'again'")[0].decode(Int64.self, at: 0)
            #expect(try await store.retry(deliveryID: id) == 1)
            #expect(try await worker.deliverBatch() == 1)
            #expect(try await delivery() == "pending 3")
            #expect(try await worker.deliverBatch() == 1)
            #expect(try await delivery() == "succeeded 4")
            #expect(try await history() == ["1:500", "2:500", "3:500", "4:200"])
            #expect(try await worker.deliverBatch() == 0)
            let entries = try await receiver.waitFor { $0.count >= 4 }
            #expect(entries.map(\.status) == [500, 500, 500, 200])
        }
    }

    @Test("a delivery loop records a round whose attempts a sender that outlived its lease logged first")
    func roundAfterAStaleSenderIsRecorded() async throws {
        try await TestEnvironment.withFresh { env in
            let (store, endpoint) = try await WebhookOrderTests.outbox(env)
            try await WebhookOrderTests.addDeliveries(env, endpoint: endpoint.id, account: "eve", 1...2)
            try await WebhookOrderTests.addDeliveries(env, endpoint: endpoint.id, account: "fay", 1...1)
            // A claims everything and stalls past its lease; B claims it again; A logs first.
            let now = Date()
            let (a, b) = try await WebhookOrderTests.staleAndCurrentClaims(store, now: now)
            #expect(a.count == 3 && b.count == 3)
            try await store.record(a.filter { $0.accountID == "eve" }.map { WebhookOrderTests.attempt($0, .succeeded) }, lease: a[0].leasedUntil, disableAfter: 86_400)
            // B's loop records its round: eve's attempts are in the log already, fay's is not.
            let worker = Self.worker(DeliveryWorker.Configuration(), in: env)
            try await worker.record(b.map { WebhookOrderTests.attempt($0, .succeeded) }, lease: b[0].leasedUntil)
            let rows = try await env.pool.query(
                """
                SELECT d.account_id || d.event_sequence, d.status, d.leased_until IS NULL, count(a.attempt)
                FROM deliveries d LEFT JOIN delivery_attempts a USING (account_id, delivery_id)
                GROUP BY d.account_id, d.delivery_id ORDER BY 1
                """
            ).map { "\(try $0.decode(String.self, at: 0)) \(try $0.decode(String.self, at: 1)) \(try $0.decode(Bool.self, at: 2)) \(try $0.decode(Int.self, at: 3))" }
            #expect(rows == ["eve1 succeeded true 1", "eve2 succeeded true 1", "fay1 succeeded true 1"])
        }
    }
}
