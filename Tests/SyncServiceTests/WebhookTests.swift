import Curl
import Foundation
import Hummingbird
import HummingbirdTesting
import Postgres
import SyncCore
import SyncService
import SyncStore
import TestSupport
import Testing

@Suite("Webhook signing")
struct WebhookSigningTests {
    @Test("the Standard Webhooks known-answer vector")
    func knownAnswer() {
        let signature = WebhookSigner.signature(
            id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
            timestamp: 1_614_265_330,
            body: Array(#"{"test": 2432232314}"#.utf8),
            secrets: [WebhookSecret(text: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")]
        )
        #expect(signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
    }

    @Test("two secrets give two signatures")
    func rotationSignsTwice() {
        let signature = WebhookSigner.signature(id: "a", timestamp: 1, body: [], secrets: [.generate(), .generate()])
        #expect(signature.split(separator: " ").count == 2)
        #expect(signature.split(separator: " ").allSatisfy { $0.hasPrefix("v1,") })
    }

    @Test("retry schedule: jitter stays within ±20 %, and ends")
    func schedule() {
        var generator = SystemRandomNumberGenerator()
        let schedule = RetrySchedule.standard
        #expect(schedule.maximumAttempts == 10)
        for attempt in 1...9 {
            let base = schedule.delays[attempt - 1]
            let delay = schedule.delay(afterAttempt: attempt, using: &generator)
            #expect(delay.map { $0 >= base * 0.8 && $0 <= base * 1.2 } == true)
        }
        #expect(schedule.delay(afterAttempt: 10, using: &generator) == nil)
        #expect(RetrySchedule.retryAfter("120") == 120)
        #expect(RetrySchedule.retryAfter("0") == 1)
        #expect(RetrySchedule.retryAfter("99999999") == TimeInterval(6 * 3600))
        #expect(RetrySchedule.retryAfter("soon") == nil)
        let date = RetrySchedule.retryAfter("Wed, 21 Oct 2015 07:28:00 GMT", now: Date(timeIntervalSince1970: 1_445_412_450))
        #expect(date == 30)
    }
}

@Suite("Webhook endpoints API")
struct EndpointAPITests {
    func createBody(_ fields: [String: Any]) throws -> ByteBuffer {
        ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: fields))
    }

    @Test("create shows the secret once; list and get never; validation and admin-only")
    func lifecycle() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application(workers: 0).test(.router) { client in
                let admin: HTTPFields = [.authorization: "Bearer \(TestCredentials.adminKey)", .contentType: "application/json"]
                let created = try await client.execute(
                    uri: "/v1/webhook-endpoints", method: .post, headers: admin,
                    body: try createBody(["url": "https://example.com/hook", "event_types": ["entitlement.activated"]])
                ) { response in
                    #expect(response.status == .created)
                    return try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any] ?? [:]
                }
                let id = try #require(created["id"] as? String)
                #expect((created["secret"] as? String)?.hasPrefix("whsec_") == true)
                try await client.execute(uri: "/v1/webhook-endpoints", method: .get, headers: admin) { response in
                    #expect(response.status == .ok)
                    #expect(!String(buffer: response.body).contains("whsec_"))
                }
                try await client.execute(uri: "/v1/webhook-endpoints/\(id)", method: .get, headers: admin) { response in
                    #expect(response.status == .ok)
                    #expect(!String(buffer: response.body).contains("whsec_"))
                }
                // Validation.
                for (fields, mention) in [
                    (["url": "ftp://example.com"], "url"),
                    (["url": "https://user:pw@example.com/x"], "credentials"),
                    (["url": "https://example.com", "event_types": ["entitlement.exploded"]], "unknown event type"),
                ] as [([String: Any], String)] {
                    try await client.execute(uri: "/v1/webhook-endpoints", method: .post, headers: admin, body: try createBody(fields)) { response in
                        #expect(response.status == .unprocessableContent)
                        #expect(String(buffer: response.body).contains(mention))
                    }
                }
                try await client.execute(uri: "/v1/webhook-endpoints", method: .post, headers: admin, body: ByteBuffer(string: "{\"url\": 5}")) { response in
                    #expect(response.status == .badRequest)
                }
                // Devices may not touch endpoints.
                let device: HTTPFields = [.authorization: "Bearer \(try await env.token(for: "alice"))"]
                try await client.execute(uri: "/v1/webhook-endpoints", method: .get, headers: device) { response in
                    #expect(response.status == .forbidden)
                }
                // Update, rotate, delete.
                try await client.execute(uri: "/v1/webhook-endpoints/\(id)", method: .patch, headers: admin, body: try createBody(["enabled": false, "event_types": NSNull()])) { response in
                    #expect(response.status == .ok)
                    let json = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]
                    #expect(json?["enabled"] as? Bool == false)
                    #expect(json?["event_types"] is NSNull || json?["event_types"] == nil)
                }
                try await client.execute(uri: "/v1/webhook-endpoints/\(id)/rotate-secret", method: .post, headers: admin) { response in
                    #expect(response.status == .ok)
                    let json = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]
                    #expect((json?["secret"] as? String)?.hasPrefix("whsec_") == true)
                    #expect(json?["secret"] as? String != created["secret"] as? String)
                    #expect(json?["previous_secret_expires_at"] is String)
                }
                try await client.execute(uri: "/v1/webhook-endpoints/\(id)", method: .delete, headers: admin) { response in
                    #expect(response.status == .noContent)
                }
                try await client.execute(uri: "/v1/webhook-endpoints/\(id)", method: .get, headers: admin) { response in
                    #expect(response.status == .notFound)
                }
                try await client.execute(uri: "/v1/webhook-endpoints/not-a-uuid", method: .get, headers: admin) { response in
                    #expect(response.status == .badRequest)
                }
            }
        }
    }
}

extension EndpointAPITests {
    @Test("every change to an endpoint is recorded with who and why, in its transaction; GET shows them, the CLI too")
    func changesAreAudited() async throws {
        try await TestEnvironment.withFresh { env in
            let admin: HTTPFields = [.authorization: "Bearer \(TestCredentials.adminKey)", .contentType: "application/json"]
            let id = try await env.application(workers: 0).test(.router) { client -> String in
                func call(_ method: HTTPRequest.Method, _ path: String, _ fields: [String: Any]? = nil) async throws -> (HTTPResponse.Status, [String: Any]) {
                    try await client.execute(
                        uri: path, method: method, headers: admin, body: try fields.map { try createBody($0) }
                    ) { response in
                        (response.status, (try? JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]) ?? [:])
                    }
                }
                let (created, endpoint) = try await call(
                    .post, "/v1/webhook-endpoints", ["url": "https://example.com/a", "actor": "alice", "reason": "the new backend"])
                #expect(created == .created)
                let id = try #require(endpoint["id"] as? String)
                #expect(try await call(.patch, "/v1/webhook-endpoints/\(id)", ["enabled": false, "actor": "bob", "reason": "receiver maintenance"]).0 == .ok)
                #expect(try await call(.patch, "/v1/webhook-endpoints/\(id)", ["url": "https://example.com/b", "event_types": ["entitlement.activated"], "enabled": true]).0 == .ok)
                #expect(try await call(.post, "/v1/webhook-endpoints/\(id)/rotate-secret").0 == .ok)
                // A bad actor is refused, and the change is not made.
                let (refused, error) = try await call(.patch, "/v1/webhook-endpoints/\(id)", ["enabled": false, "actor": "   "])
                #expect(refused == .badRequest)
                #expect(((error["error"] as? [String: Any])?["message"] as? String)?.contains("actor") == true)
                let (read, shown) = try await call(.get, "/v1/webhook-endpoints/\(id)")
                #expect(read == .ok)
                #expect(shown["enabled"] as? Bool == true)
                let audit = try #require(shown["audit"] as? [[String: Any]])
                #expect(audit.map { $0["action"] as? String } == ["endpoint_create", "endpoint_disable", "endpoint_update", "endpoint_rotate_secret"])
                #expect(audit.map { $0["actor"] as? String } == ["alice", "bob", "admin", "admin"])
                #expect(audit.map { $0["reason"] as? String } == ["the new backend", "receiver maintenance", nil, nil])
                #expect(audit.allSatisfy { $0["target"] as? String == "endpoint \(id)" })
                let update = audit[2]["outcome"] as? String ?? ""
                #expect(update.contains("url https://example.com/a → https://example.com/b"), "\(update)")
                #expect(update.contains("all event types → event types entitlement.activated") && update.contains("enabled"), "\(update)")
                #expect((audit[3]["outcome"] as? String)?.contains("previous one signs") == true)
                #expect(!String(describing: audit).contains("whsec_"), "no secret in the audit")
                return id
            }
            // The command line records its changes too ($USER unless --actor), and shows them.
            let disabled = try await SubsyncCommand.run(["endpoints", "disable", id, "--actor", "carol", "--reason", "load test"], env: env)
            #expect(disabled.status == 0, "\(disabled.stderr)")
            let shown = try await SubsyncCommand.run(["endpoints", "show", id], env: env)
            #expect(shown.stdout.contains("carol  endpoint_disable  disabled  (load test)"), "\(shown.stdout)")
            let deleted = try await SubsyncCommand.run(["endpoints", "delete", id, "--actor", "carol"], env: env)
            #expect(deleted.status == 0, "\(deleted.stderr)")
            let last = try await env.pool.query(
                "SELECT actor, action, outcome FROM operator_actions WHERE target = \("endpoint \(id)") ORDER BY id DESC LIMIT 1")
            #expect(try last.first?.decode(String.self, at: 1) == "endpoint_delete")
            #expect(try last.first?.decode(String.self, at: 2) == "deleted (https://example.com/b); 0 pending deliveries cancelled")
        }
    }
}

/// Deliveries to the real Python receiver, signatures verified by `standardwebhooks`.
@Suite("Webhook delivery", .serialized)
struct WebhookDeliveryTests {
    static let loopback = try? AddressGuard(allow: ["127.0.0.0/8", "::1/128"])

    /// Registers an endpoint for `path` on the receiver and tells the receiver its secret.
    func endpoint(_ env: TestEnvironment, _ receiver: WebhookReceiver, _ path: String, eventTypes: [String]? = nil) async throws -> (UUID, WebhookSecret) {
        let (endpoint, secret) = try await EndpointStore(pool: env.pool).create(url: receiver.url(path), eventTypes: eventTypes)
        try await receiver.setSecrets([secret.text])
        return (endpoint.id, secret)
    }

    func sync(_ client: some TestClientProtocol, account: String, _ reports: [Report]) async throws {
        let result = try await client.sync(account: account, body: try SyncBody(device: "iphone", reports: reports).data)
        #expect(result.status == .accepted)
    }

    func attempts(_ env: TestEnvironment, endpoint: UUID) async throws -> [(status: Int?, error: String?, excerpt: String?)] {
        try await env.pool.query(
            """
            SELECT a.status_code, a.error, a.response_excerpt FROM delivery_attempts a
            JOIN deliveries d USING (account_id, delivery_id) WHERE d.endpoint_id = \(endpoint) ORDER BY a.attempted_at
            """
        ).map { (try $0.decode(Int?.self, at: 0), try $0.decode(String?.self, at: 1), try $0.decode(String?.self, at: 2)) }
    }

    func waitForAttempts(_ env: TestEnvironment, endpoint: UUID, count: Int, seconds: Double = 300) async throws -> [(status: Int?, error: String?, excerpt: String?)] {
        let deadline = Date().addingTimeInterval(seconds)
        var result: [(status: Int?, error: String?, excerpt: String?)] = []
        while Date() < deadline {
            result = try await attempts(env, endpoint: endpoint)
            if result.count >= count { return result }
            try await Task.sleep(for: .milliseconds(100))
        }
        return result
    }

    @Test("events reach the endpoint signed, with the event id as webhook-id, in sequence order")
    func deliversSignedEvents() async throws {
        let receiver = try await WebhookReceiver()
        try await TestEnvironment.withFresh { env in
            let (endpointID, _) = try await endpoint(env, receiver, "/ok")
            try await env.application(deliveryWorkers: 1, webhookGuard: Self.loopback).testLive { client in
                try await sync(client, account: "alice", [TestReports.report("r1")])
                try await sync(client, account: "alice", [TestReports.report("r2", revoked: 0)])
                let events = try await env.pool.query("SELECT event_id::text, sequence, type FROM events WHERE account_id = 'alice' ORDER BY sequence")
                    .map { (try $0.decode(String.self, at: 0), try $0.decode(Int.self, at: 1), try $0.decode(String.self, at: 2)) }
                #expect(events.count >= 3)
                let entries = try await receiver.waitFor { $0.count >= events.count }
                #expect(entries.count == events.count)
                #expect(entries.allSatisfy { !$0.verifiedBy.isEmpty }, "standardwebhooks rejected a signature")
                #expect(entries.map(\.id) == events.map(\.0))
                #expect(entries.compactMap(\.body?.data.sequence) == events.map(\.1))
                #expect(entries.compactMap(\.body?.type) == events.map(\.2))
                #expect(entries.allSatisfy { $0.body?.data.accountID == "alice" })
                // Payloads are kept as the service encoded them (sql/0016, `json`): decoding and
                // encoding them again gives the same bytes, which `jsonb`'s re-ordered, spaced
                // print-out would not.
                let stored = try await env.pool.query("SELECT payload::text FROM events WHERE account_id = 'alice' ORDER BY sequence")
                    .map { try $0.decode(String.self, at: 0) }
                #expect(stored.count == events.count)
                for text in stored {
                    let event = try JSONDecoder.postgres.decode(Event.self, from: Data(text.utf8))
                    #expect(try PostgresJSONEncoder.string(event) == text)
                }
                // The outcome is recorded after the batch's sends finish.
                var succeeded = 0
                try await waitUntil {
                    let delivered = try await env.pool.query("SELECT count(*) FROM deliveries WHERE endpoint_id = \(endpointID) AND status = 'succeeded'")
                    succeeded = try delivered[0].decode(Int.self, at: 0)
                    return succeeded == events.count
                }
                #expect(succeeded == events.count)
            }
        }
    }

    @Test("one listening connection per process wakes its resolution workers and every delivery loop")
    func oneListenerWakesEveryPart() async throws {
        let receiver = try await WebhookReceiver()
        try await TestEnvironment.withFresh { env in
            let (endpointID, _) = try await endpoint(env, receiver, "/ok")
            // A process that resolves and delivers but polls once an hour (and sweeps once an
            // hour): once its parts are waiting, only a NOTIFY can wake them. Reports come
            // through another process, as from a second `serve`.
            let back = try env.application(
                workers: 2, sweepInterval: .seconds(3600), deliveryWorkers: 3, webhookGuard: Self.loopback, pollInterval: .seconds(3600))
            let front = try env.application(workers: 0)
            try await back.testLive { _ in
                let listening = """
                    SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'
                    """
                try await waitUntil { try await env.scalar(listening) == 1 }
                // One connection for the two workers and the three loops (each part had its own).
                #expect(try await env.scalar(listening) == 1)
                // The parts' first rounds, which ran at start, found nothing and they now wait.
                try await Task.sleep(for: .seconds(1))
                try await front.test(.router) { client in
                    let result = try await client.sync(
                        account: "nora", body: try SyncBody(device: "iphone", reports: [TestReports.report("n1")]).data,
                        waitMilliseconds: nil)
                    #expect(result.status == .accepted)
                }
                var succeeded = 0
                // Far less than the hour's poll: only a NOTIFY can have woken the parts by then.
                try await waitUntil(seconds: 600) {
                    succeeded = try await env.pool.query(
                        "SELECT count(*) FROM deliveries WHERE account_id = 'nora' AND endpoint_id = \(endpointID) AND status = 'succeeded'"
                    )[0].decode(Int.self, at: 0)
                    return succeeded > 0
                }
                #expect(succeeded > 0, "the report was resolved and its webhook sent within the wait, not at the next poll")
                #expect(try await env.scalar("SELECT count(*) FROM reports WHERE account_id = 'nora' AND status = 'pending'") == 0)
                let entries = try await receiver.waitFor { $0.contains { $0.body?.data.accountID == "nora" } }
                #expect(entries.contains { $0.body?.data.accountID == "nora" && !$0.verifiedBy.isEmpty })
            }
        }
    }

    @Test("500 then success on retry; the webhook-id stays the same")
    func retriesAfterServerError() async throws {
        let receiver = try await WebhookReceiver()
        try await TestEnvironment.withFresh { env in
            let (endpointID, _) = try await endpoint(env, receiver, "/flaky/1", eventTypes: ["entitlement.activated"])
            try await env.application(deliveryWorkers: 1, webhookGuard: Self.loopback, retrySchedule: RetrySchedule(delays: [0.5, 0.5])).testLive { client in
                try await sync(client, account: "bob", [TestReports.report("r1")])
                let entries = try await receiver.waitFor { $0.filter { $0.status == 200 }.count >= 1 }
                #expect(entries.map(\.status) == [500, 200])
                #expect(Set(entries.map(\.id)).count == 1)
                // Outcomes are recorded after each batch's sends finish.
                let attempts = try await waitForAttempts(env, endpoint: endpointID, count: 2)
                #expect(attempts.map(\.status) == [500, 200])
            }
        }
    }

    @Test("webhook secrets are sealed at rest: a database copy holds no secret, deliveries still verify, keys rotate with reseal")
    func secretsAreSealedAtRest() async throws {
        let receiver = try await WebhookReceiver()
        try await TestEnvironment.withFresh { env in
            let (keyA, keyB) = (SecretSealer.generateKey(), SecretSealer.generateKey())
            let sealerA = try SecretSealer(keys: [keyA])
            // One endpoint from before sealing (in clear), one sealed.
            let (legacy, legacySecret) = try await EndpointStore(pool: env.pool).create(url: receiver.url("/ok"))
            let (sealed, sealedSecret) = try await EndpointStore(pool: env.pool, sealer: sealerA).create(url: receiver.url("/ok"))
            func stored(_ id: UUID) async throws -> String {
                try await env.pool.query("SELECT secret FROM webhook_endpoints WHERE endpoint_id = \(id)")[0].decode(String.self, at: 0)
            }
            let raw = try await stored(sealed.id)
            #expect(raw.hasPrefix("sealed:v1:"))
            #expect(!raw.contains(String(sealedSecret.text.dropFirst(6).prefix(12))), "the database holds the secret")
            #expect(try await stored(legacy.id) == legacySecret.text)
            // Deliveries open both and sign with them: the receiver verifies every request.
            try await receiver.setSecrets([legacySecret.text, sealedSecret.text])
            try await env.application(deliveryWorkers: 1, webhookGuard: WebhookDeliveryTests.loopback, secretSealer: sealerA).testLive { client in
                _ = try await client.sync(account: "sealy", body: try SyncBody(device: "iphone", reports: [TestReports.report("r1")]).data)
                let entries = try await receiver.waitFor { $0.filter { $0.status == 200 }.count >= 4 }
                #expect(entries.count >= 4)
                #expect(entries.allSatisfy { !$0.verifiedBy.isEmpty }, "a delivery signed with a sealed secret did not verify")
            }
            // Rotation: B first, A still opens; reseal rewrites both endpoints with B.
            let out = try await SubsyncCommand.run(["endpoints", "reseal", "--json"], env: env, extra: ["SUBSYNC_SECRET_KEYS": "\(keyB),\(keyA)"])
            #expect(out.status == 0, "\(out.stderr)")
            #expect(out.object["resealed"] as? Int == 2)
            let sealerB = try SecretSealer(keys: [keyB])
            for (id, secret) in [(legacy.id, legacySecret), (sealed.id, sealedSecret)] {
                let value = try await stored(id)
                #expect(sealerB.isCurrent(value))
                #expect(try sealerB.open(value) == secret)
                #expect(throws: SecretSealer.OpenError.self) { try sealerA.open(value) }
            }
            // A tampered value does not open; no key, no reseal.
            var tampered = Array(try await stored(sealed.id))
            tampered[tampered.count - 3] = tampered[tampered.count - 3] == "A" ? "B" : "A"
            #expect(throws: SecretSealer.OpenError.self) { try sealerB.open(String(tampered)) }
            let noKey = try await SubsyncCommand.run(["endpoints", "reseal"], env: env, extra: ["SUBSYNC_SECRET_KEYS": ""])
            #expect(noKey.status == 64 && noKey.stderr.contains("SUBSYNC_SECRET_KEYS"))
            let badKey = try await SubsyncCommand.run(["endpoints", "list"], env: env, extra: ["SUBSYNC_SECRET_KEYS": "short"])
            #expect(badKey.status == 64 && badKey.stderr.contains("32 bytes"))
        }
    }

    @Test("an endpoint whose secret cannot be opened (its key removed before a reseal) holds only its own deliveries: the others go out, no attempt is counted, and list, show and the API say so")
    func unreadableSecretHoldsOnlyItsEndpoint() async throws {
        let receiver = try await WebhookReceiver()
        try await TestEnvironment.withFresh { env in
            let (oldKey, newKey) = (SecretSealer.generateKey(), SecretSealer.generateKey())
            // Sealed with the old key, which the operator then dropped without `endpoints reseal`.
            let (stranded, _) = try await EndpointStore(pool: env.pool, sealer: try SecretSealer(keys: [oldKey])).create(url: receiver.url("/ok"))
            let sealer = try SecretSealer(keys: [newKey])
            let (healthy, healthySecret) = try await EndpointStore(pool: env.pool, sealer: sealer).create(url: receiver.url("/ok"))
            try await receiver.setSecrets([healthySecret.text])
            try await env.application(
                deliveryWorkers: 1, webhookGuard: WebhookDeliveryTests.loopback, metricsToken: "metrics-token-0123456789", secretSealer: sealer
            ).testLive { client in
                for index in 0..<3 {
                    _ = try await client.sync(account: "keyless-\(index)", body: try SyncBody(device: "iphone", reports: [TestReports.report("r1")]).data)
                }
                let events = try await env.scalar("SELECT count(*) FROM events")
                #expect(events >= 6)
                // Every event reaches the healthy endpoint, signed with its secret, although the
                // same claims took the stranded endpoint's deliveries.
                let healthyDone = try await waitUntil {
                    try await env.scalar("SELECT count(*) FROM deliveries WHERE endpoint_id = '\(healthy.id.uuidString)' AND status = 'succeeded'") == events
                }
                #expect(healthyDone, "deliveries to the healthy endpoint did not all succeed")
                let entries = try await receiver.entries()
                #expect(entries.count == events && entries.allSatisfy { !$0.verifiedBy.isEmpty })
                // The stranded endpoint's wait, not attempted, not dead, not leased. A hold lasts a
                // minute from its claim, which came after the delivery was made, however long ago.
                let waiting = try await env.pool.query(
                    """
                    SELECT count(*), count(*) FILTER (WHERE attempts = 0 AND status = 'pending' AND leased_until IS NULL
                                                          AND next_attempt_at > created_at + interval '50 seconds')
                    FROM deliveries WHERE endpoint_id = \(stranded.id)
                    """)[0]
                #expect(try waiting.decode(Int.self, at: 0) == events)
                #expect(try waiting.decode(Int.self, at: 1) >= 1, "the claimed head was not held a minute")
                #expect(try await env.scalar("SELECT count(*) FROM delivery_attempts a JOIN deliveries d USING (account_id, delivery_id) WHERE d.endpoint_id = '\(stranded.id.uuidString)'") == 0)

                let (_, listed) = try await client.getJSON("/v1/webhook-endpoints")
                let readable = Dictionary(uniqueKeysWithValues: ((listed["data"] as? [[String: Any]]) ?? []).compactMap { endpoint in
                    (endpoint["id"] as? String).map { ($0, endpoint["secret_readable"] as? Bool) }
                })
                #expect(readable[stranded.id.uuidString.lowercased()] == false)
                #expect(readable[healthy.id.uuidString.lowercased()] == true)
                try await client.execute(uri: "/metrics", method: .get, headers: [.authorization: "Bearer metrics-token-0123456789"]) { response in
                    #expect(String(buffer: response.body).contains("subsync_webhook_deliveries_held_unreadable_secret_total"))
                }
            }
            let list = try await SubsyncCommand.run(["endpoints", "list"], env: env, extra: ["SUBSYNC_SECRET_KEYS": newKey])
            #expect(list.stdout.contains("\(stranded.id.uuidString.lowercased())  enabled   \(receiver.url("/ok"))  all events  SECRET UNREADABLE"), "\(list.stdout)")
            let show = try await SubsyncCommand.run(["endpoints", "show", stranded.id.uuidString], env: env, extra: ["SUBSYNC_SECRET_KEYS": newKey])
            #expect(show.stdout.contains("UNREADABLE"), "\(show.stdout)")
            // With the old key back (after the new one), everything opens again.
            let restored = try await SubsyncCommand.run(
                ["endpoints", "list", "--json"], env: env, extra: ["SUBSYNC_SECRET_KEYS": "\(newKey),\(oldKey)"])
            #expect(restored.array.allSatisfy { $0["secret_readable"] as? Bool == true })
        }
    }

    @Test("a receiver answering a NUL byte or a binary body holds up nobody: every attempt is recorded once, nothing is sent twice")
    func binaryAnswersDoNotStallDelivery() async throws {
        let receiver = try await WebhookReceiver()
        try await TestEnvironment.withFresh { env in
            let (healthy, _) = try await endpoint(env, receiver, "/ok")
            let (nul, _) = try await endpoint(env, receiver, "/nul")
            let (binary, _) = try await endpoint(env, receiver, "/binary")
            try await env.application(deliveryWorkers: 1, webhookGuard: Self.loopback).testLive { client in
                for index in 0..<10 {
                    try await sync(client, account: "acct-\(index)", [TestReports.report("r1")])
                }
                let events = try await env.pool.query("SELECT count(*) FROM events")[0].decode(Int.self, at: 0)
                #expect(events >= 20)
                // Every delivery of every endpoint is recorded as succeeded, after one attempt.
                let recorded = try await waitUntil {
                    try await env.pool.query("SELECT count(*) FROM deliveries WHERE status = 'succeeded'")[0].decode(Int.self, at: 0) == 3 * events
                }
                #expect(recorded, "deliveries still pending: the round's record failed")
                let attempts = try await env.pool.query(
                    "SELECT count(*), count(DISTINCT (account_id, delivery_id)), max(attempt) FROM delivery_attempts")
                #expect(try attempts[0].decode(Int.self, at: 0) == 3 * events)
                #expect(try attempts[0].decode(Int.self, at: 1) == 3 * events)
                #expect(try attempts[0].decode(Int.self, at: 2) == 1)
                // What the receivers answered is kept as text an operator can read.
                let nulExcerpts = try await self.attempts(env, endpoint: nul).map(\.excerpt)
                #expect(nulExcerpts.count == events && nulExcerpts.allSatisfy { $0 == "\u{FFFD}" }, "\(Set(nulExcerpts))")
                let binaryExcerpts = try await self.attempts(env, endpoint: binary).map(\.excerpt)
                #expect(binaryExcerpts.allSatisfy { ($0?.utf8.count ?? 0) > 0 && ($0?.utf8.count ?? 0) <= 4096 })
                #expect(binaryExcerpts.allSatisfy { !($0?.unicodeScalars.contains { $0.value < 9 } ?? true) })
                // Each event reached each receiver once: nothing was resent after a failed record.
                let entries = try await receiver.entries()
                for path in ["/ok", "/nul", "/binary"] {
                    let ids = entries.filter { $0.path == path }.map(\.id)
                    #expect(ids.count == events, "\(path) got \(ids.count) requests for \(events) events")
                    #expect(Set(ids).count == ids.count, "\(path) got an event twice")
                }
                let healthyAttempts = try await self.attempts(env, endpoint: healthy)
                #expect(healthyAttempts.allSatisfy { $0.status == 200 && $0.excerpt == "ok" })
            }
        }
    }

    @Test("a timeout, a refused connection and a 3xx are failures; redirects are not followed; big answers are capped")
    func failures() async throws {
        let receiver = try await WebhookReceiver()
        try await TestEnvironment.withFresh { env in
            // Only this endpoint outlasts the 10 s timeout: the others must answer within it,
            // however busy the machine.
            let (slow, _) = try await endpoint(env, receiver, "/slow/60000", eventTypes: ["entitlement.activated"])
            let (redirect, _) = try await endpoint(env, receiver, "/redirect", eventTypes: ["entitlement.activated"])
            let (huge, _) = try await endpoint(env, receiver, "/huge", eventTypes: ["entitlement.activated"])
            let closedPort = LocalServer.freePort()
            let (refused, _) = try await EndpointStore(pool: env.pool).create(url: "http://127.0.0.1:\(closedPort)/x", eventTypes: ["entitlement.activated"])
            try await receiver.setSecrets([])
            try await env.application(deliveryWorkers: 1, webhookGuard: Self.loopback, retrySchedule: RetrySchedule(delays: [600]), webhookTimeout: .seconds(10)).testLive { client in
                try await sync(client, account: "carl", [TestReports.report("r1")])
                let slowAttempts = try await waitForAttempts(env, endpoint: slow, count: 1)
                #expect(slowAttempts.first?.status == nil)
                #expect(slowAttempts.first?.error?.lowercased().contains("time") == true)
                let refusedAttempts = try await waitForAttempts(env, endpoint: refused.id, count: 1)
                #expect(refusedAttempts.first?.status == nil)
                #expect(refusedAttempts.first?.error?.isEmpty == false)
                let redirectAttempts = try await waitForAttempts(env, endpoint: redirect, count: 1)
                #expect(redirectAttempts.first?.status == 302)
                let hugeAttempts = try await waitForAttempts(env, endpoint: huge, count: 1)
                #expect(hugeAttempts.first?.status == 200)
                #expect((hugeAttempts.first?.excerpt?.utf8.count ?? 0) <= 4096)
                // The redirect target was never requested.
                let entries = try await receiver.entries()
                #expect(!entries.contains { $0.path == "/ok" })
                let pending = try await env.pool.query("SELECT count(*) FROM deliveries WHERE status = 'pending' AND endpoint_id = ANY(\([slow, redirect, refused.id])::uuid[])")
                #expect(try pending[0].decode(Int.self, at: 0) == 3)
            }
        }
    }

    @Test("410 disables the endpoint; 429 with Retry-After waits at least that long")
    func goneAndRetryAfter() async throws {
        let receiver = try await WebhookReceiver()
        try await TestEnvironment.withFresh { env in
            let (gone, _) = try await endpoint(env, receiver, "/status/410", eventTypes: ["entitlement.activated"])
            let (limited, secret) = try await endpoint(env, receiver, "/retry-after/2", eventTypes: ["entitlement.activated"])
            try await receiver.setSecrets([secret.text])
            try await env.application(deliveryWorkers: 1, webhookGuard: Self.loopback, retrySchedule: RetrySchedule(delays: [0.1, 0.1])).testLive { client in
                try await sync(client, account: "dana", [TestReports.report("r1")])
                let entries = try await receiver.waitFor { $0.filter { $0.path == "/retry-after/2" }.count >= 2 }
                let limitedEntries = entries.filter { $0.path == "/retry-after/2" }
                #expect(limitedEntries.map(\.status) == [429, 200])
                if limitedEntries.count == 2 {
                    #expect(limitedEntries[1].receivedAt - limitedEntries[0].receivedAt >= 1.9)
                }
                let endpoint = try await EndpointStore(pool: env.pool).get(gone)
                #expect(endpoint?.enabled == false)
                #expect(endpoint?.disabledReason?.contains("410") == true)
                _ = limited
            }
        }
    }

    @Test("an endpoint whose deliveries only fail for longer than the limit is disabled; one success clears the clock")
    func failingEndpointIsDisabled() async throws {
        let receiver = try await WebhookReceiver()
        try await TestEnvironment.withFresh { env in
            let (failing, _) = try await endpoint(env, receiver, "/status/500")
            let (flaky, _) = try await endpoint(env, receiver, "/flaky/1")
            let schedule = RetrySchedule(delays: Array(repeating: 0.3, count: 20), jitter: 0)
            try await env.application(deliveryWorkers: 1, webhookGuard: Self.loopback, retrySchedule: schedule, webhookDisableAfter: 1.5).testLive { client in
                try await sync(client, account: "ivy", [TestReports.report("r1")])
                try await waitUntil { try await EndpointStore(pool: env.pool).get(failing)?.enabled == false }
                let endpoint = try await EndpointStore(pool: env.pool).get(failing)
                #expect(endpoint?.enabled == false)
                #expect(endpoint?.disabledReason?.contains("failed") == true)
                // The endpoint that recovered stays enabled with no failure clock.
                let recovered = try await EndpointStore(pool: env.pool).get(flaky)
                #expect(recovered?.enabled == true)
                #expect(recovered?.failingSince == nil)
            }
        }
    }

    @Test("loopback and localhost are refused without the allowlist, accepted with it")
    func addressGuard() async throws {
        let receiver = try await WebhookReceiver()
        try await TestEnvironment.withFresh { env in
            let (byIP, secret) = try await endpoint(env, receiver, "/ok", eventTypes: ["entitlement.activated"])
            let (byName, _) = try await EndpointStore(pool: env.pool).create(url: "http://localhost:\(receiver.port)/ok", eventTypes: ["entitlement.activated"])
            try await receiver.setSecrets([secret.text])
            try await env.application(deliveryWorkers: 1, webhookGuard: .publicOnly, retrySchedule: RetrySchedule(delays: [60])).testLive { client in
                try await sync(client, account: "eve", [TestReports.report("r1")])
                for endpoint in [byIP, byName.id] {
                    let attempts = try await waitForAttempts(env, endpoint: endpoint, count: 1)
                    #expect(attempts.first?.status == nil)
                    #expect(attempts.first?.error?.contains("not allowed") == true, "\(attempts.first?.error ?? "-")")
                }
                #expect(try await receiver.entries().isEmpty)
            }
            // The same deliveries, retried with loopback allowed, arrive.
            _ = try await DeliveryStore(pool: env.pool).retry(deliveryID: nil)
            try await env.pool.query("UPDATE deliveries SET next_attempt_at = now(), attempts = 0")
            try await env.application(deliveryWorkers: 1, webhookGuard: Self.loopback).testLive { _ in
                let entries = try await receiver.waitFor { $0.count >= 2 }
                #expect(entries.count == 2)
            }
        }
    }

    @Test("after a secret rotation both the old and the new secret verify, for 24 hours")
    func rotation() async throws {
        let receiver = try await WebhookReceiver()
        try await TestEnvironment.withFresh { env in
            let (endpointID, old) = try await endpoint(env, receiver, "/ok", eventTypes: ["entitlement.activated"])
            let rotated = try #require(try await EndpointStore(pool: env.pool).rotateSecret(endpointID))
            try await receiver.setSecrets([old.text, rotated.1.text])
            try await env.application(deliveryWorkers: 1, webhookGuard: Self.loopback).testLive { client in
                try await sync(client, account: "finn", [TestReports.report("r1")])
                let entries = try await receiver.waitFor { !$0.isEmpty }
                #expect(entries.first?.verifiedBy == [0, 1])
                #expect(entries.first?.signature?.split(separator: " ").count == 2)
            }
        }
    }

    @Test("replay re-sends a range with the same event ids")
    func replay() async throws {
        let receiver = try await WebhookReceiver()
        try await TestEnvironment.withFresh { env in
            let (endpointID, _) = try await endpoint(env, receiver, "/ok")
            let start = Date().addingTimeInterval(-1)
            try await env.application(deliveryWorkers: 1, webhookGuard: Self.loopback).testLive { client in
                try await sync(client, account: "gus", [TestReports.report("r1")])
                let first = try await receiver.waitFor { $0.count >= 2 }
                let replayed = try await DeliveryStore(pool: env.pool).replay(endpoint: endpointID, since: start, until: nil)
                #expect(replayed == first.count)
                let all = try await receiver.waitFor { $0.count >= first.count * 2 }
                #expect(all.count == first.count * 2)
                #expect(Set(all.map(\.id)) == Set(first.map(\.id)))
            }
        }
    }

    @Test("a receiver that is down for a while gets every event once it is back")
    func receiverDownThenBack() async throws {
        let receiver = try await WebhookReceiver()
        try await TestEnvironment.withFresh { env in
            let (endpointID, secret) = try await endpoint(env, receiver, "/ok")
            receiver.stop()
            // A long tail of 1 s retries: on a busy machine the receiver may come back well after
            // ten attempts, and no delivery may run out of attempts (dead) before it does.
            let schedule = RetrySchedule(delays: [0.3, 0.3, 0.3, 0.5] + Array(repeating: 1, count: 120))
            try await env.application(deliveryWorkers: 1, webhookGuard: Self.loopback, retrySchedule: schedule).testLive { client in
                for index in 0..<5 {
                    try await sync(client, account: "hal-\(index)", [TestReports.report("r\(index)")])
                }
                _ = try await waitForAttempts(env, endpoint: endpointID, count: 10)
                // The secret from its start: a delivery may arrive before a later setSecrets would.
                try await receiver.start(secrets: [secret.text])
                let events = try await env.pool.query("SELECT event_id::text FROM events").map { try $0.decode(String.self, at: 0) }
                let entries = try await receiver.waitFor(seconds: 300) { Set($0.map(\.id)).isSuperset(of: events) }
                #expect(Set(entries.map(\.id)).isSuperset(of: events))
                #expect(entries.allSatisfy { !$0.verifiedBy.isEmpty })
            }
        }
    }
}
