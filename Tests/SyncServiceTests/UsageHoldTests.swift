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

/// Holds: units reserved before they are spent (docs/USAGE.md).
@Suite("Usage holds", .serialized)
struct UsageHoldTests {
    static func holdBody(device: String, units: Int, ttl: Int? = nil) throws -> Data {
        var body: [String: Any] = ["device": ["id": device], "meter": "minutes", "units": units]
        if let ttl { body["ttl_seconds"] = ttl }
        return try JSONSerialization.data(withJSONObject: body)
    }

    @Test("two serve processes under many concurrent holds never grant more than the balance")
    func concurrentHoldsNeverOverdraw() async throws {
        let first = try await ServeProcess.onTestDatabase(environment: ServeProcess.apiOnly)
        defer { first.terminate() }
        let second = try await ServeProcess.onTestDatabase(environment: ServeProcess.apiOnly)
        defer { second.terminate() }
        let client = CurlClient(configuration: .init(addressGuard: WebhookOrderTests.loopback ?? .publicOnly))
        defer { client.shutdown() }
        // A free account: 100 minutes. 80 devices ask for 3 minutes each at once, half of them
        // through each process: exactly 100 minutes are granted (33 holds of 3 and one of 1).
        // The processes share the suite's database: a new account each run.
        let account = "race-\(UUID().uuidString.prefix(8).lowercased())"
        let answers = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for index in 0..<80 {
                let port = index % 2 == 0 ? first.port : second.port
                let body = try Self.holdBody(device: "device-\(index)", units: 3)
                group.addTask {
                    // As a device would: a 503 (the database busy on a starved core) is retried.
                    var attempts = 0
                    while true {
                        attempts += 1
                        let response = try await client.execute(CurlRequest(
                            url: "http://127.0.0.1:\(port)/v1/accounts/\(account)/usage/holds", method: "POST",
                            headers: [("Authorization", "Bearer \(ServeProcess.adminKey)"), ("Content-Type", "application/json")],
                            body: Array(body), totalTimeout: .seconds(120)))
                        if response.status == 503, attempts < 30 {
                            try await Task.sleep(for: .milliseconds(500))
                            continue
                        }
                        let json = (try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]) ?? [:]
                        return (response.status, json["granted"] as? Int ?? 0)
                    }
                }
            }
            var answers: [(Int, Int)] = []
            for try await answer in group { answers.append(answer) }
            return answers
        }
        let granted = answers.reduce(0) { $0 + $1.1 }
        #expect(granted == 100, "granted \(granted): \(answers.map(\.0))")
        #expect(answers.filter { $0.0 == 201 }.count == 34)
        #expect(answers.filter { $0.0 == 409 }.count == 46)
        #expect(answers.allSatisfy { $0.0 == 201 || $0.0 == 409 }, "\(answers.map(\.0))")
    }

    @Test("a hold is settled with what was used, released, or expires by itself")
    func settleReleaseAndExpire() async throws {
        try await TestEnvironment.withFresh { env in
            let clock = ManualClock(start: Date())
            try await env.application(clock: clock).testLive { client in
                let (status, reserved) = try await client.postJSON("/v1/accounts/eve/usage/holds", body: try Self.holdBody(device: "phone", units: 60, ttl: 600))
                #expect(status == .created, "\(reserved)")
                #expect(reserved["granted"] as? Int == 60)
                let hold = try #require((reserved["hold"] as? [String: Any])?["id"] as? String)
                // The web client sees what is left: 100 - 60 held.
                let (_, account) = try await client.getJSON("/v1/accounts/eve")
                #expect(UsageAPITests.minutes(account)?["available"] as? Int == 40)
                #expect(UsageAPITests.minutes(account)?["held"] as? Int == 60)
                let (_, second) = try await client.postJSON("/v1/accounts/eve/usage/holds", body: try Self.holdBody(device: "web", units: 60))
                #expect(second["granted"] as? Int == 40)
                let secondID = try #require((second["hold"] as? [String: Any])?["id"] as? String)
                let (exhausted, refused) = try await client.postJSON("/v1/accounts/eve/usage/holds", body: try Self.holdBody(device: "tablet", units: 1))
                #expect(exhausted == .conflict)
                #expect(refused.errorCode == "usage_exhausted")

                // The phone's call took 45 minutes: settled, 15 come back; settling again is the same answer.
                let settle = try JSONSerialization.data(withJSONObject: ["units": 45])
                let (settled, afterSettle) = try await client.postJSON("/v1/accounts/eve/usage/holds/\(hold)/settle", body: settle)
                #expect(settled == .ok, "\(afterSettle)")
                #expect(UsageAPITests.minutes(afterSettle)?["used"] as? Int == 45)
                #expect(UsageAPITests.minutes(afterSettle)?["available"] as? Int == 15)
                let (again, _) = try await client.postJSON("/v1/accounts/eve/usage/holds/\(hold)/settle", body: settle)
                #expect(again == .ok)
                let other = try JSONSerialization.data(withJSONObject: ["units": 50])
                let (conflict, ended) = try await client.postJSON("/v1/accounts/eve/usage/holds/\(hold)/settle", body: other)
                #expect(conflict == .conflict)
                #expect(ended.errorCode == "hold_ended")
                #expect(try await env.scalar("SELECT count(*) FROM usage_entries WHERE account_id = 'eve' AND kind = 'usage'") == 1)

                // The web hold is never settled: after its 300 s it counts for nothing.
                clock.advance(by: .seconds(301))
                let (_, later) = try await client.getJSON("/v1/accounts/eve")
                #expect(UsageAPITests.minutes(later)?["held"] as? Int == 0)
                #expect(UsageAPITests.minutes(later)?["available"] as? Int == 55)
                // Releasing it now is harmless; an unknown hold is 404, a bad id 400.
                let (released, _) = try await client.execute(uri: "/v1/accounts/eve/usage/holds/\(secondID)", method: .delete,
                                                             headers: [.authorization: "Bearer \(TestCredentials.adminKey)"]) { ($0.status, 0) }
                #expect(released == .ok)
                let (missing, _) = try await client.postJSON("/v1/accounts/eve/usage/holds/\(UUID().uuidString)/settle", body: settle)
                #expect(missing == .notFound)
                let (badID, _) = try await client.postJSON("/v1/accounts/eve/usage/holds/not-a-uuid/settle", body: settle)
                #expect(badID == .badRequest)
                let (badUnits, badUnitsJSON) = try await client.postJSON("/v1/accounts/eve/usage/holds", body: try Self.holdBody(device: "phone", units: 0))
                #expect(badUnits == .unprocessableContent)
                #expect(badUnitsJSON.errorCode == "invalid_units")
                let (badTTL, badTTLJSON) = try await client.postJSON("/v1/accounts/eve/usage/holds", body: try Self.holdBody(device: "phone", units: 1, ttl: 0))
                #expect(badTTL == .unprocessableContent)
                #expect(badTTLJSON.errorCode == "invalid_ttl")
            }
        }
    }
}
