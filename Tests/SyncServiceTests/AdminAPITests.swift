import Foundation
import Hummingbird
import HummingbirdTesting
import Postgres
import SyncCore
import SyncService
import SyncStore
import TestSupport
import Testing

/// The admin routes of the operator console (docs/API.md, *Admin API*), against a real database.
@Suite("Admin API")
struct AdminAPITests {
    static func r(_ id: String, device: String = "iphone", transaction: String = "t1", expires: TimeInterval? = 29 * 86_400) -> Report {
        TestReports.report(id, device: device, transaction: transaction, expires: expires)
    }

    /// Sends `body` with `method` and the admin key (or `credential`); status and JSON.
    static func call(
        _ client: some TestClientProtocol, _ method: HTTPRequest.Method, _ uri: String, body: [String: Any]? = nil,
        credential: String? = TestCredentials.adminKey
    ) async throws -> (status: HTTPResponse.Status, json: [String: Any]) {
        var headers: HTTPFields = [:]
        if let credential { headers[.authorization] = "Bearer \(credential)" }
        var buffer: ByteBuffer?
        if let body {
            headers[.contentType] = "application/json"
            buffer = ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body))
        }
        return try await client.execute(uri: uri, method: method, headers: headers, body: buffer) { response in
            (response.status, (try? JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]) ?? [:])
        }
    }

    @Test("every admin route needs the admin key: 401 without it, 403 with a device token, JSON errors")
    func adminOnly() async throws {
        try await TestEnvironment.withFresh { env in
            let token = try await env.token(for: "alice")
            try await env.application(workers: 0).test(.router) { client in
                let routes: [(HTTPRequest.Method, String)] = [
                    (.get, "/v1/admin/accounts?q=alice"), (.get, "/v1/admin/accounts/alice"),
                    (.post, "/v1/admin/accounts/alice/revoke"), (.post, "/v1/admin/accounts/alice/unrevoke"),
                    (.post, "/v1/admin/accounts/alice/reconcile"), (.get, "/v1/admin/deliveries"),
                    (.post, "/v1/admin/deliveries/retry-dead"), (.post, "/v1/admin/deliveries/1/retry"),
                    (.post, "/v1/admin/deliveries/1/cancel"), (.get, "/v1/admin/stats"), (.get, "/v1/admin/metrics/history"),
                ]
                for (method, uri) in routes {
                    let anonymous = try await Self.call(client, method, uri, credential: nil)
                    #expect(anonymous.status == .unauthorized, "\(uri)")
                    #expect(anonymous.json.errorCode == "unauthenticated", "\(uri)")
                    let wrong = try await Self.call(client, method, uri, credential: "not-the-admin-key-0000000")
                    #expect(wrong.status == .unauthorized, "\(uri)")
                    let device = try await Self.call(client, method, uri, credential: token)
                    #expect(device.status == .forbidden, "\(uri)")
                    #expect(device.json.errorCode == "forbidden", "\(uri)")
                }
            }
        }
    }

    @Test("named admin keys: each operator's key names them in the audit log (a body's actor stays beside it as a note), whoami says whose key it is, one key rotates without the others, and the shared key keeps working as admin")
    func namedAdminKeys() async throws {
        let (ann, bob, annRotated) = ("ann-key-0123456789abcdef", "bob-key-0123456789abcdef", "ann-key-rotated-0123456789")
        try await TestEnvironment.withFresh { env in
            let named = await Authenticator(adminKey: nil, adminKeys: ["ann": ann, "bob": bob], tokenSecret: TestCredentials.tokenSecret)
            try await env.application(workers: 0, authenticator: named).test(.router) { client in
                var (status, json) = try await Self.call(client, .get, "/v1/admin/whoami", credential: ann)
                #expect(status == .ok && json["name"] as? String == "ann" && json["named"] as? Bool == true && json["records_as"] as? String == "ann")
                (status, _) = try await Self.call(client, .get, "/v1/admin/whoami", credential: "ann-key-0123456789abcdeX")
                #expect(status == .unauthorized)
                // Ann's action, with the name her console typed beside it; Bob's without any;
                // Bob claiming to be Ann is recorded as Bob.
                (status, json) = try await Self.call(
                    client, .post, "/v1/admin/accounts/zed/revoke-tokens", body: ["actor": "pager duty", "reason": "lost phone"], credential: ann)
                #expect(status == .ok, "\(json)")
                (status, _) = try await Self.call(client, .post, "/v1/admin/accounts/zed/revoke-tokens", body: [:], credential: bob)
                #expect(status == .ok)
                (status, _) = try await Self.call(client, .post, "/v1/admin/accounts/zed/revoke-tokens", body: ["actor": "ann"], credential: bob)
                #expect(status == .ok)
                (status, json) = try await Self.call(
                    client, .post, "/v1/webhook-endpoints", body: ["url": "https://hooks.example.com/x", "actor": "Bob B."], credential: bob)
                #expect(status == .created, "\(json)")
                // A device token is still no admin.
                let device = try await env.authenticator.mint(accountID: "yan", validFor: 600)
                (status, _) = try await Self.call(client, .get, "/v1/admin/whoami", credential: device)
                #expect(status == .forbidden)
            }
            let actors = try await env.pool.query("SELECT actor FROM operator_actions ORDER BY id").map { try $0.decode(String.self, at: 0) }
            #expect(actors == ["ann (pager duty)", "bob", "bob (ann)", "bob (Bob B.)"])
            // Ann's key rotated: her old one is refused, Bob's is untouched.
            let rotated = await Authenticator(adminKey: nil, adminKeys: ["ann": annRotated, "bob": bob], tokenSecret: TestCredentials.tokenSecret)
            try await env.application(workers: 0, authenticator: rotated).test(.router) { client in
                let answer1 = try await Self.call(client, .get, "/v1/admin/whoami", credential: ann)
                #expect(answer1.status == .unauthorized)
                let answer2 = try await Self.call(client, .get, "/v1/admin/whoami", credential: annRotated)
                #expect(answer2.json["name"] as? String == "ann")
                let answer3 = try await Self.call(client, .get, "/v1/admin/whoami", credential: bob)
                #expect(answer3.status == .ok)
            }
            // The shared key beside named ones cannot pass for one: `admin (note)`.
            let both = await Authenticator(adminKey: TestCredentials.adminKey, adminKeys: ["ann": annRotated], tokenSecret: TestCredentials.tokenSecret)
            try await env.application(workers: 0, authenticator: both).test(.router) { client in
                let answer = try await Self.call(client, .post, "/v1/admin/accounts/zed/revoke-tokens", body: ["actor": "ann"])
                #expect(answer.status == .ok)
            }
            #expect(try await env.scalar("SELECT count(*) FROM operator_actions WHERE actor = 'admin (ann)'") == 1)
            // The one shared key alone: `admin`, and the body's actor is what is recorded.
            try await env.application(workers: 0).test(.router) { client in
                let (status, json) = try await Self.call(client, .get, "/v1/admin/whoami")
                #expect(status == .ok && json["name"] as? String == "admin" && json["named"] as? Bool == false && json["records_as"] == nil)
                let answer4 = try await Self.call(client, .post, "/v1/admin/accounts/zed/revoke-tokens", body: ["actor": "ops-olga"])
                #expect(answer4.status == .ok)
            }
            #expect(try await env.scalar("SELECT count(*) FROM operator_actions WHERE actor = 'ops-olga'") == 1)
        }
    }

    @Test("search finds an account by its id, a transaction id, an original transaction id or an app account token")
    func search() async throws {
        try await TestEnvironment.withFresh { env in
            try await OperationsFixture.ingest(
                [("alice", "iphone", Self.r("a1", transaction: "tx-alice")), ("bob", "ipad", Self.r("b1", transaction: "tx-bob"))], pool: env.pool)
            // A renewal of alice's purchase: its own transaction id, the original's id kept.
            var renewal = Self.r("a2", transaction: "tx-alice-2")
            renewal.originalTransactionID = "tx-alice"
            try await OperationsFixture.ingest([("alice", "iphone", renewal)], pool: env.pool)
            let token = UUID()
            try await env.pool.query("INSERT INTO app_account_tokens (app_account_token, account_id) VALUES (\(token), 'bob')")
            try await env.application(workers: 0).test(.router) { client in
                func matches(_ q: String) async throws -> [[String: Any]] {
                    let (status, json) = try await Self.call(client, .get, "/v1/admin/accounts?q=\(q)")
                    #expect(status == .ok)
                    return json["matches"] as? [[String: Any]] ?? []
                }
                let byID = try await matches("alice")
                #expect(byID.map { $0["account_id"] as? String } == ["alice"])
                #expect(byID.first?["matched_by"] as? [String] == ["account_id"])
                #expect(byID.first?["tier"] as? String == "premium")
                let byOriginal = try await matches("tx-alice")
                #expect(byOriginal.map { $0["account_id"] as? String } == ["alice"])
                #expect(byOriginal.first?["matched_by"] as? [String] == ["original_transaction_id", "transaction_id"])
                #expect(try await matches("tx-alice-2").first?["matched_by"] as? [String] == ["transaction_id"])
                let byToken = try await matches(token.uuidString.lowercased())
                #expect(byToken.map { $0["account_id"] as? String } == ["bob"])
                #expect(byToken.first?["matched_by"] as? [String] == ["app_account_token"])
                #expect(try await matches("nobody").isEmpty)
                let empty = try await Self.call(client, .get, "/v1/admin/accounts?q=%20")
                #expect(empty.status == .badRequest)
                #expect(empty.json.errorCode == "invalid_query")
            }
        }
    }

    @Test("an account's state and its timeline: reports, resolutions, events and deliveries interleaved in time order")
    func accountAndTimeline() async throws {
        try await TestEnvironment.withFresh { env in
            try await OperationsFixture.addEndpoint(env.pool)
            try await OperationsFixture.ingest([("alice", "iphone", Self.r("a1"))], pool: env.pool)
            try await OperationsFixture.ingest([("alice", "ipad", Self.r("a2", device: "ipad", expires: 60 * 86_400))], pool: env.pool)
            // One attempt recorded for the first delivery, as a delivery worker would.
            try await env.pool.query(
                """
                INSERT INTO delivery_attempts (account_id, delivery_id, attempt, status_code, latency_ms, error)
                SELECT account_id, delivery_id, 1, 500, 42, 'HTTP 500' FROM deliveries WHERE account_id = 'alice'
                ORDER BY delivery_id LIMIT 1
                """
            )
            try await env.application(workers: 0).test(.router) { client in
                let (status, json) = try await Self.call(client, .get, "/v1/admin/accounts/alice")
                #expect(status == .ok)
                let account = try #require(json["account"] as? [String: Any])
                let state = try #require(account["state"] as? [String: Any])
                #expect(state["tier"] as? String == "premium")
                let entitlements = try #require(state["entitlements"] as? [[String: Any]])
                #expect(entitlements.first?["status"] as? String == "active")
                #expect((account["transactions"] as? [[String: Any]])?.first?["report_count"] as? Int == 2)
                let timeline = try #require(json["timeline"] as? [[String: Any]])
                let kinds = timeline.compactMap { $0["kind"] as? String }
                #expect(kinds.filter { $0 == "report" }.count == 2)
                #expect(kinds.filter { $0 == "resolution" }.count == 2)
                let events = timeline.compactMap { $0["event"] as? [String: Any] }
                #expect(events.compactMap { $0["sequence"] as? Int } == Array(1...events.count))
                #expect(events.first?["type"] as? String == "entitlement.activated")
                let deliveries = timeline.compactMap { $0["delivery"] as? [String: Any] }
                #expect(deliveries.count == events.count)
                let attempts = deliveries.first?["attempts"] as? [[String: Any]]
                #expect(attempts?.count == 1)
                #expect(attempts?.first?["status_code"] as? Int == 500)
                #expect(attempts?.first?["latency_ms"] as? Int == 42)
                #expect(deliveries.first?["endpoint_url"] as? String == "http://127.0.0.1:9/hooks")
                // Time order, and at one instant report < resolution < event < delivery.
                let rank = ["report": 0, "resolution": 1, "event": 2, "delivery": 3]
                let keys = timeline.map { ($0["at"] as? String ?? "", rank[$0["kind"] as? String ?? ""] ?? 9) }
                let times = keys.map { RFC3339.parse($0.0) ?? .distantFuture }
                #expect(!times.contains(.distantFuture))
                #expect(zip(keys, keys.dropFirst()).allSatisfy { a, b in
                    let (ta, tb) = (RFC3339.parse(a.0) ?? .distantPast, RFC3339.parse(b.0) ?? .distantPast)
                    return ta < tb || (ta == tb && a.1 <= b.1)
                })
                // A report comes before the resolution that joined it (a later transaction).
                // (A resolution and its events are stamped by the database's and the service's
                // clocks, a few milliseconds apart either way, so their order is not asserted.)
                let firstReport = try #require(kinds.firstIndex(of: "report"))
                let firstResolution = try #require(kinds.firstIndex(of: "resolution"))
                #expect(firstReport < firstResolution)
                let resolution = try #require(timeline[firstResolution]["resolution"] as? [String: Any])
                #expect(resolution["report_ids"] as? [String] == ["a1"])
                #expect(resolution["by"] as? String == "worker")
                // Each delivery comes after its event.
                for (index, entry) in timeline.enumerated() {
                    guard let delivery = (entry["delivery"] as? [String: Any])?["delivery"] as? [String: Any] else { continue }
                    let sequence = delivery["event_sequence"] as? Int
                    let eventIndex = timeline.firstIndex { ($0["event"] as? [String: Any])?["sequence"] as? Int == sequence }
                    #expect(eventIndex.map { $0 < index } == true, "delivery of event \(sequence ?? -1) before its event")
                }
                let missing = try await Self.call(client, .get, "/v1/admin/accounts/nobody")
                #expect(missing.status == .notFound)
                #expect(missing.json.errorCode == "account_not_found")
                let bad = try await Self.call(client, .get, "/v1/admin/accounts/a%20b")
                #expect(bad.status == .badRequest)
            }
        }
    }

    @Test("a report no worker has resolved yet is in the timeline as pending, with no resolution, and the account is found by it")
    func pendingReport() async throws {
        try await TestEnvironment.withFresh { env in
            _ = try await ReportInbox(pool: env.pool).submit(
                accountID: "newbie", device: DeviceInfo(id: "pixel"), reports: [Self.r("n1", device: "pixel", transaction: "tx-new")])
            try await env.application(workers: 0).test(.router) { client in
                let found = try await Self.call(client, .get, "/v1/admin/accounts?q=newbie")
                let match = (found.json["matches"] as? [[String: Any]])?.first
                #expect(match?["account_id"] as? String == "newbie")
                #expect(match?["tier"] == nil, "no resolution yet, so no tier")
                let (status, json) = try await Self.call(client, .get, "/v1/admin/accounts/newbie")
                #expect(status == .ok)
                #expect((json["account"] as? [String: Any])?["pending_reports"] as? Int == 1)
                let timeline = json["timeline"] as? [[String: Any]] ?? []
                #expect(timeline.compactMap { $0["kind"] as? String } == ["report"])
                let report = timeline.first?["report"] as? [String: Any]
                #expect(report?["status"] as? String == "pending")
                #expect(report?["device_id"] as? String == "pixel")
                #expect(report?["transaction_id"] as? String == "tx-new")
                #expect(report?["resolved_at"] == nil)
            }
        }
    }

    @Test("revoke and unrevoke record an audited admin report, resolve at once and write the events")
    func revokeAndUnrevoke() async throws {
        try await TestEnvironment.withFresh { env in
            try await OperationsFixture.ingest([("alice", "iphone", Self.r("a1"))], pool: env.pool)
            try await env.application(workers: 0).test(.router) { client in
                let path = "/v1/admin/accounts/alice"
                let noReason = try await Self.call(client, .post, path + "/revoke", body: ["transaction_id": "t1", "reason": " ", "actor": "carol"])
                #expect(noReason.status == .badRequest)
                let missing = try await Self.call(client, .post, path + "/revoke", body: ["transaction_id": "nope", "reason": "test", "actor": "carol"])
                #expect(missing.status == .notFound)
                #expect(missing.json.errorCode == "transaction_not_found")
                let malformed = try await Self.call(client, .post, path + "/revoke", body: ["reason": "test"])
                #expect(malformed.status == .badRequest)
                #expect(malformed.json.errorCode == "invalid_request")

                let (status, result) = try await Self.call(
                    client, .post, path + "/revoke", body: ["transaction_id": "t1", "reason": "chargeback #881", "actor": "carol"])
                #expect(status == .ok)
                #expect(result["recorded"] as? Bool == true)
                #expect(result["revoked"] as? Bool == true)
                #expect(result["actor"] as? String == "carol")
                #expect(result["reason"] as? String == "chargeback #881")
                #expect((result["events_written"] as? Int ?? 0) >= 1)
                let reportID = try #require(result["report_id"] as? String)

                let (_, view) = try await Self.call(client, .get, path)
                let state = (view["account"] as? [String: Any])?["state"] as? [String: Any]
                #expect(state?["tier"] as? String == "free")
                let timeline = view["timeline"] as? [[String: Any]] ?? []
                let adminReport = timeline.compactMap { $0["report"] as? [String: Any] }.first { $0["report_id"] as? String == reportID }
                #expect(adminReport?["source"] as? String == "admin")
                #expect(adminReport?["admin_actor"] as? String == "carol")
                #expect(adminReport?["admin_reason"] as? String == "chargeback #881")
                let events = timeline.compactMap { $0["event"] as? [String: Any] }
                #expect(events.contains { $0["type"] as? String == "entitlement.revoked" && $0["origin"] as? String == "admin" })

                let again = try await Self.call(client, .post, path + "/revoke", body: ["transaction_id": "t1", "reason": "twice", "actor": "carol"])
                #expect(again.json["recorded"] as? Bool == false)
                let back = try await Self.call(client, .post, path + "/unrevoke", body: ["transaction_id": "t1", "reason": "won the dispute", "actor": "dave"])
                #expect(back.json["recorded"] as? Bool == true)
                #expect(back.json["revoked"] as? Bool == false)
                let (_, after) = try await Self.call(client, .get, path)
                #expect(((after["account"] as? [String: Any])?["state"] as? [String: Any])?["tier"] as? String == "premium")
            }
        }
    }

    @Test("reconcile one account: the dry run shows drift and changes nothing; the repair fixes it")
    func reconcile() async throws {
        try await TestEnvironment.withFresh { env in
            try await OperationsFixture.ingest([("alice", "iphone", Self.r("a1"))], pool: env.pool)
            try await env.application(workers: 0).test(.router) { client in
                let path = "/v1/admin/accounts/alice/reconcile"
                let clean = try await Self.call(client, .post, path)
                #expect(clean.status == .ok)
                #expect(clean.json["dry_run"] as? Bool == true)
                #expect((clean.json["differences"] as? [Any])?.isEmpty == true)

                try await env.pool.query("UPDATE account_states SET tier = 'business' WHERE account_id = 'alice'")
                let before = try await OperationsFixture.fingerprint(env.pool)
                let dry = try await Self.call(client, .post, path, body: ["dry_run": true, "actor": "erin"])
                let differences = dry.json["differences"] as? [[String: Any]] ?? []
                #expect(differences.contains { $0["field"] as? String == "account_states.tier" && $0["recomputed"] as? String == "premium" })
                #expect(dry.json["repaired"] as? Bool == false)
                #expect(dry.json["actor"] as? String == "erin")
                #expect(try await OperationsFixture.fingerprint(env.pool) == before)

                let repair = try await Self.call(client, .post, path, body: ["dry_run": false, "actor": "erin"])
                #expect(repair.json["repaired"] as? Bool == true)
                #expect(try await env.scalar("SELECT count(*) FROM account_states WHERE account_id = 'alice' AND tier = 'premium'") == 1)
                let after = try await Self.call(client, .post, path)
                #expect((after.json["differences"] as? [Any])?.isEmpty == true)

                let missing = try await Self.call(client, .post, "/v1/admin/accounts/nobody/reconcile")
                #expect(missing.status == .notFound)
                let badBody = try await Self.call(client, .post, path, body: ["dry_run": "yes"])
                #expect(badBody.status == .badRequest)

                // Every call that did something is in the audit log (sql/0015), in order, and in
                // the account's timeline; refused calls wrote nothing.
                let audit = repair.json["audit"] as? [String: Any]
                #expect(audit?["action"] as? String == "reconcile" && audit?["actor"] as? String == "erin")
                #expect((audit?["outcome"] as? String)?.contains("repaired") == true)
                let withReason = try await Self.call(client, .post, path, body: ["actor": "erin", "reason": "ticket 42"])
                #expect((withReason.json["audit"] as? [String: Any])?["reason"] as? String == "ticket 42")
                let timeline = try await Self.call(client, .get, "/v1/admin/accounts/alice").json["timeline"] as? [[String: Any]] ?? []
                let actions = timeline.compactMap { $0["action"] as? [String: Any] }
                #expect(actions.map { $0["action"] as? String } == ["reconcile_dry_run", "reconcile_dry_run", "reconcile", "reconcile_dry_run", "reconcile_dry_run"])
                #expect(actions.map { $0["actor"] as? String } == ["admin", "erin", "erin", "admin", "erin"])
                #expect(try await env.scalar("SELECT count(*) FROM operator_actions") == 5)
                let longReason = try await Self.call(client, .post, path, body: ["reason": String(repeating: "x", count: 501)])
                #expect(longReason.status == .badRequest)
                #expect(try await env.scalar("SELECT count(*) FROM operator_actions") == 5)
            }
        }
    }

    @Test("deliveries: list by status, retry and cancel one, retry every dead one; 404 and 409 for the wrong ones")
    func deliveries() async throws {
        try await TestEnvironment.withFresh { env in
            try await OperationsFixture.addEndpoint(env.pool)
            try await OperationsFixture.ingest([("alice", "iphone", Self.r("a1")), ("bob", "iphone", Self.r("b1", transaction: "t2"))], pool: env.pool)
            // No delivery worker runs: the deliveries (two events each) stay pending; make them dead
            // as the last attempt would.
            try await env.pool.query("UPDATE deliveries SET status = 'dead', attempts = 10, completed_at = now(), last_status_code = 500")
            let ids = try await env.pool.query("SELECT delivery_id FROM deliveries ORDER BY delivery_id").map { try $0.decode(Int64.self, at: 0) }
            #expect(ids.count == 4)
            try await env.application(workers: 0).test(.router) { client in
                let dead = try await Self.call(client, .get, "/v1/admin/deliveries?status=dead")
                #expect((dead.json["data"] as? [Any])?.count == 4)
                #expect(try await Self.call(client, .get, "/v1/admin/deliveries?status=lost").status == .badRequest)
                #expect(try await Self.call(client, .get, "/v1/admin/deliveries?limit=0").status == .badRequest)
                #expect(try await Self.call(client, .get, "/v1/admin/deliveries?endpoint_id=x").status == .badRequest)

                let cancelDead = try await Self.call(client, .post, "/v1/admin/deliveries/\(ids[0])/cancel")
                #expect(cancelDead.status == .conflict)
                #expect(cancelDead.json.errorCode == "delivery_not_pending")

                let retried = try await Self.call(client, .post, "/v1/admin/deliveries/\(ids[0])/retry", body: ["actor": "frank"])
                #expect(retried.status == .ok)
                #expect(retried.json["action"] as? String == "retry")
                #expect(retried.json["actor"] as? String == "frank")
                #expect((retried.json["delivery"] as? [String: Any])?["status"] as? String == "pending")
                // A fresh schedule; the count of attempts goes on (the history numbers them).
                #expect((retried.json["delivery"] as? [String: Any])?["attempts"] as? Int == 10)

                let cancelled = try await Self.call(client, .post, "/v1/admin/deliveries/\(ids[0])/cancel")
                #expect((cancelled.json["delivery"] as? [String: Any])?["status"] as? String == "cancelled")

                let bulk = try await Self.call(client, .post, "/v1/admin/deliveries/retry-dead", body: ["actor": "frank"])
                #expect(bulk.json["retried"] as? Int == 3)
                #expect((bulk.json["audit"] as? [String: Any])?["outcome"] as? String == "3 dead deliveries retried")
                // The audit log: the retry and the cancel on the delivery's account, the bulk retry on none.
                let logged = try await env.pool.query(
                    "SELECT action, COALESCE(account_id, '-'), COALESCE(target, '-'), actor FROM operator_actions ORDER BY id"
                ).map { "\(try $0.decode(String.self, at: 0)) \(try $0.decode(String.self, at: 1)) \(try $0.decode(String.self, at: 2)) \(try $0.decode(String.self, at: 3))" }
                let owner = try await env.pool.query("SELECT account_id FROM deliveries WHERE delivery_id = \(ids[0])")[0].decode(String.self, at: 0)
                #expect(logged == [
                    "delivery_retry \(owner) delivery \(ids[0]) frank", "delivery_cancel \(owner) delivery \(ids[0]) admin",
                    "dead_deliveries_retry - - frank",
                ])
                #expect(try await env.scalar("SELECT count(*) FROM deliveries WHERE status = 'pending'") == 3)
                #expect(try await env.scalar("SELECT count(*) FROM deliveries WHERE status = 'cancelled'") == 1)

                try await env.pool.query("UPDATE deliveries SET status = 'succeeded' WHERE delivery_id = \(ids[1])")
                let succeeded = try await Self.call(client, .post, "/v1/admin/deliveries/\(ids[1])/retry")
                #expect(succeeded.status == .conflict)
                #expect(succeeded.json.errorCode == "delivery_succeeded")
                let unknown = try await Self.call(client, .post, "/v1/admin/deliveries/999999/retry")
                #expect(unknown.status == .notFound)
                #expect(unknown.json.errorCode == "delivery_not_found")
                #expect(try await Self.call(client, .post, "/v1/admin/deliveries/abc/retry").status == .badRequest)

                // A delivery a loop has out (leased, as a claim leaves it) is not cancelled: 409,
                // nothing changed, nothing audited.
                try await env.pool.query("UPDATE deliveries SET leased_until = now() + interval '1 minute' WHERE delivery_id = \(ids[2])")
                let audited = try await env.scalar("SELECT count(*) FROM operator_actions")
                let beingSent = try await Self.call(client, .post, "/v1/admin/deliveries/\(ids[2])/cancel")
                #expect(beingSent.status == .conflict)
                #expect(beingSent.json.errorCode == "delivery_being_sent")
                #expect(try await env.scalar("SELECT count(*) FROM deliveries WHERE delivery_id = \(ids[2]) AND status = 'pending'") == 1)
                #expect(try await env.scalar("SELECT count(*) FROM operator_actions") == audited)
            }
        }
    }

    @Test("stats: per-endpoint success rate, p50 and p99 latency over the window, and since when it fails")
    func stats() async throws {
        try await TestEnvironment.withFresh { env in
            try await OperationsFixture.addEndpoint(env.pool)
            try await OperationsFixture.ingest([("alice", "iphone", Self.r("a1"))], pool: env.pool)
            // 100 attempts of one delivery: latencies 1...100 ms, the first 90 answered 200.
            try await env.pool.query(
                """
                INSERT INTO delivery_attempts (account_id, delivery_id, attempt, status_code, latency_ms)
                SELECT d.account_id, d.delivery_id, n, CASE WHEN n <= 90 THEN 200 ELSE 500 END, n
                FROM (SELECT account_id, delivery_id FROM deliveries ORDER BY delivery_id LIMIT 1) d, generate_series(1, 100) n
                """
            )
            try await env.pool.query("UPDATE webhook_endpoints SET failing_since = '2026-01-02T03:04:05Z'")
            try await env.application(workers: 0).test(.router) { client in
                let (status, json) = try await Self.call(client, .get, "/v1/admin/stats?window_seconds=3600")
                #expect(status == .ok)
                #expect(json["window_seconds"] as? Double == 3600)
                let endpoint = try #require((json["endpoints"] as? [[String: Any]])?.first)
                #expect(endpoint["attempts"] as? Int == 100)
                #expect(endpoint["success_rate"] as? Double == 0.9)
                #expect(endpoint["p50_latency_ms"] as? Double == 50.5)
                let p99 = try #require(endpoint["p99_latency_ms"] as? Double)
                #expect(abs(p99 - 99.01) < 0.001)
                #expect(endpoint["failing_since"] as? String == "2026-01-02T03:04:05Z")
                #expect((json["deliveries_by_status"] as? [String: Int])?["pending"] != nil)
                #expect(try await Self.call(client, .get, "/v1/admin/stats?window_seconds=5").status == .badRequest)
            }
            // The window ends at the service's clock, not the database's: two hours on, the
            // attempts (made now) are out of an hour's window, and the pending report two hours old.
            _ = try await ReportInbox(pool: env.pool).submit(accountID: "waiting", device: DeviceInfo(id: "iphone"), reports: [Self.r("w1")])
            let later = ManualClock(start: Date().addingTimeInterval(7_200))
            try await env.application(workers: 0, clock: later).test(.router) { client in
                let (_, json) = try await Self.call(client, .get, "/v1/admin/stats?window_seconds=3600")
                let endpoint = try #require((json["endpoints"] as? [[String: Any]])?.first)
                #expect(endpoint["attempts"] as? Int == 0)
                #expect((json["oldest_pending_age_seconds"] as? Double).map { $0 >= 7_100 } == true, "\(json)")
            }
        }
    }

    @Test("the metrics history keeps an hour of samples, with rates from the counters")
    func history() {
        let history = MetricsHistory(span: 3600)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        let counters = MetricsHistory.Counters(prometheusText: """
            # TYPE subsync_reports_resolved_total counter
            subsync_reports_resolved_total 100
            subsync_reports_accepted_total 120
            subsync_signatures_refused_total{code="bad"} 3
            """)
        #expect(counters == MetricsHistory.Counters(reportsAccepted: 120, reportsResolved: 100, eventsWritten: 0))
        history.record(at: start, inboxDepth: 5, resolutionLagSeconds: 1.5, quarantinedReports: 0, counters: counters)
        history.record(
            at: start.addingTimeInterval(5), inboxDepth: 2, resolutionLagSeconds: 0.5, quarantinedReports: 1,
            counters: .init(reportsAccepted: 170, reportsResolved: 150, eventsWritten: 25))
        let samples = history.samples()
        #expect(samples.count == 2)
        #expect(samples[0].reportsResolvedPerSecond == nil)
        #expect(samples[1].reportsResolvedPerSecond == 10)
        #expect(samples[1].reportsAcceptedPerSecond == 10)
        #expect(samples[1].eventsWrittenPerSecond == 5)
        history.record(at: start.addingTimeInterval(3604), inboxDepth: 0, resolutionLagSeconds: 0, quarantinedReports: 0, counters: nil)
        #expect(history.samples().map(\.inboxDepth) == [2, 0])
    }

    @Test("the history route answers the sampler's samples")
    func historyRoute() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application(workers: 1).testLive { client in
                var samples: [[String: Any]] = []
                let sampled = try await waitUntil(seconds: 300) {
                    let (status, json) = try await Self.call(client, .get, "/v1/admin/metrics/history")
                    #expect(status == .ok)
                    #expect(json["span_seconds"] as? Double == 3600)
                    samples = json["samples"] as? [[String: Any]] ?? []
                    return !samples.isEmpty
                }
                #expect(sampled)
                #expect(samples.first?["inbox_depth"] as? Int == 0)
            }
        }
    }
}
