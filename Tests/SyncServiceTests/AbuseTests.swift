import Foundation
import Hummingbird
import HummingbirdTesting
import Postgres
import SyncCore
import SyncService
import SyncStore
import TestSupport
import Testing

@Suite("Abuse limits")
struct AbuseTests {
    @Test("a device over its account's rate gets 429 with Retry-After, stores nothing, and recovers")
    func rateLimitTriggersAndRecovers() async throws {
        try await TestEnvironment.withFresh { env in
            // One token per 5 s on the test's clock: no token is earned while the clock stands.
            let clock = ManualClock()
            let limit = RateLimiter.Limit(ratePerSecond: 0.2, burst: 3)
            try await env.application(workers: 0, accountRateLimit: limit, clock: clock).test(.router) { client in
                let token = try await env.token(for: "rita")
                for index in 0..<3 {
                    let body = try SyncBody(device: "iphone", reports: [TestReports.report("r\(index)")]).data
                    #expect(try await client.sync(account: "rita", body: body, credential: token, waitMilliseconds: nil).status == .accepted)
                }
                let limitedBody = try SyncBody(device: "iphone", reports: [TestReports.report("limited")]).data
                var retryAfter: Int?
                try await client.execute(
                    uri: "/v1/accounts/rita/sync", method: .post,
                    headers: [.authorization: "Bearer \(token)", .contentType: "application/json"],
                    body: ByteBuffer(bytes: limitedBody)
                ) { response in
                    #expect(response.status == .tooManyRequests)
                    retryAfter = response.headers[.retryAfter].flatMap(Int.init)
                    #expect(String(buffer: response.body).contains("rate_limited"))
                }
                let wait = try #require(retryAfter)
                #expect(wait == 5, "an empty bucket refills one token in 5 s")
                #expect(try await env.count("reports", accountID: "rita") == 3)
                // The admin key (the app's backend) is not limited.
                #expect(try await client.sync(account: "rita", body: try SyncBody(device: "backend", reports: [TestReports.report("admin")]).data, waitMilliseconds: nil).status == .accepted)
                // Just before Retry-After it is still refused; after it, the device may sync again.
                clock.advance(by: .seconds(wait) - .milliseconds(100))
                #expect(try await client.sync(account: "rita", body: limitedBody, credential: token, waitMilliseconds: nil).status == .tooManyRequests)
                #expect(try await env.count("reports", accountID: "rita") == 4)
                clock.advance(by: .seconds(wait))
                #expect(try await client.sync(account: "rita", body: limitedBody, credential: token, waitMilliseconds: nil).status == .accepted)
                #expect(try await env.count("reports", accountID: "rita") == 5)
            }
        }
    }

    @Test("a device resending reports under fresh ids meets the account's daily report quota: 429, nothing stored, and the quota refills")
    func dailyReportQuota() async throws {
        try await TestEnvironment.withFresh { env in
            let clock = ManualClock()
            let quota = RateLimiter.Limit(ratePerSecond: 150.0 / 86_400, burst: 150)
            try await env.application(workers: 0, reportQuota: quota, clock: clock).test(.router) { client in
                let token = try await env.token(for: "flood")
                func body(_ prefix: String, _ count: Int) throws -> Data {
                    try SyncBody(device: "iphone", reports: (0..<count).map { TestReports.report("\(prefix)-\($0)") }).data
                }
                #expect(try await client.sync(account: "flood", body: try body("a", 100), credential: token, waitMilliseconds: nil).status == .accepted)
                let refused = try await client.sync(account: "flood", body: try body("b", 60), credential: token, waitMilliseconds: nil)
                #expect(refused.status == .tooManyRequests)
                #expect(refused.json.errorCode == "rate_limited")
                #expect(try await env.count("reports", accountID: "flood") == 100, "a refused request stores nothing")
                #expect(try await client.sync(account: "flood", body: try body("c", 50), credential: token, waitMilliseconds: nil).status == .accepted)
                #expect(try await client.sync(account: "flood", body: try body("d", 1), credential: token, waitMilliseconds: nil).status == .tooManyRequests)
                // The app's backend (admin key) is not counted.
                #expect(try await client.sync(account: "flood", body: try body("e", 10), waitMilliseconds: nil).status == .accepted)
                // A day later the device may send again.
                clock.advance(by: .seconds(86_400))
                #expect(try await client.sync(account: "flood", body: try body("f", 100), credential: token, waitMilliseconds: nil).status == .accepted)
                #expect(try await env.count("reports", accountID: "flood") == 260)
            }
        }
    }

    @Test("a device's limit holds across serve processes: the buckets are shared in PostgreSQL", arguments: [true, false])
    func limitsHoldAcrossProcesses(shared: Bool) async throws {
        try await TestEnvironment.withFresh { env in
            // Two applications on one database, each with buckets of its own in memory: as two
            // `serve` processes behind a load balancer. No token refills while the clock stands.
            let clock = ManualClock()
            let limit = RateLimiter.Limit(ratePerSecond: 0.1, burst: 10)
            let first = try env.application(workers: 0, deviceRateLimit: limit, sharedRateLimits: shared, clock: clock)
            let second = try env.application(workers: 0, deviceRateLimit: limit, sharedRateLimits: shared, clock: clock)
            let token = try await env.token(for: "roamer")
            try await first.test(.router) { one in
                try await second.test(.router) { two in
                    // 30 requests at once, half through each process.
                    let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                        for index in 0..<30 {
                            let body = try SyncBody(device: "iphone", reports: [TestReports.report("r\(index)")]).data
                            group.addTask {
                                let client: any TestClientProtocol = index % 2 == 0 ? one : two
                                return try await client.sync(account: "roamer", body: body, credential: token, waitMilliseconds: nil).status
                            }
                        }
                        return try await group.reduce(into: []) { $0.append($1) }
                    }
                    let accepted = statuses.filter { $0 == .accepted }.count
                    #expect(statuses.allSatisfy { $0 == .accepted || $0 == .tooManyRequests }, "\(statuses)")
                    if shared {
                        #expect(accepted == 10, "the device's one burst, whichever process it reached")
                    } else {
                        #expect(accepted == 20, "per process only: each process gives the whole burst")
                    }
                    #expect(try await env.count("reports", accountID: "roamer") == accepted)
                    guard shared else { return }
                    // A refused request waits for the shared bucket: 10 s for one token.
                    let late = try SyncBody(device: "iphone", reports: [TestReports.report("late")]).data
                    var retryAfter: String?
                    try await two.execute(
                        uri: "/v1/accounts/roamer/sync", method: .post,
                        headers: [.authorization: "Bearer \(token)", .contentType: "application/json"], body: ByteBuffer(bytes: late)
                    ) { response in
                        #expect(response.status == .tooManyRequests)
                        retryAfter = response.headers[.retryAfter]
                    }
                    #expect(retryAfter == "10")
                    clock.advance(by: .seconds(10))
                    #expect(try await two.sync(account: "roamer", body: late, credential: token, waitMilliseconds: nil).status == .accepted)
                    // Full buckets are forgotten; a bucket still refilling is kept.
                    #expect(try await RateBuckets(pool: env.pool).forgetFull(now: clock.now()) == 0)
                    #expect(try await RateBuckets(pool: env.pool).forgetFull(now: clock.now().addingTimeInterval(101)) == 1)
                }
            }
        }
    }

    @Test("per-device limits are separate from the account's")
    func deviceLimit() async throws {
        try await TestEnvironment.withFresh { env in
            // On the test's clock: no token refills between the requests, however slow they are.
            let limit = RateLimiter.Limit(ratePerSecond: 0.1, burst: 1)
            try await env.application(workers: 0, deviceRateLimit: limit, clock: ManualClock()).test(.router) { client in
                let token = try await env.token(for: "dev")
                let first = try SyncBody(device: "iphone", reports: [TestReports.report("a")]).data
                let second = try SyncBody(device: "iphone", reports: [TestReports.report("b")]).data
                let other = try SyncBody(device: "ipad", reports: [TestReports.report("c")]).data
                #expect(try await client.sync(account: "dev", body: first, credential: token, waitMilliseconds: nil).status == .accepted)
                #expect(try await client.sync(account: "dev", body: second, credential: token, waitMilliseconds: nil).status == .tooManyRequests)
                #expect(try await client.sync(account: "dev", body: other, credential: token, waitMilliseconds: nil).status == .accepted)
            }
        }
    }

    @Test(
        "a control character in any text field of a sync is a 400 naming the field, and nothing is stored",
        arguments: ["\u{0}", "\n", "\u{1B}[31m", "\u{1F}", "\u{7F}", "\u{85}", "\u{9F}"]
    )
    func controlCharactersAreRefused(bad: String) async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application(workers: 0).test(.router) { client in
                let fields: [(path: String, set: (inout [String: Any]) -> Void)] = [
                    ("device.platform", { $0["device"] = ["id": "iphone", "platform": "ios\(bad)"] }),
                    ("device.app_version", { $0["device"] = ["id": "iphone", "app_version": "1.0\(bad)"] }),
                    ("device.id", { $0["device"] = ["id": "iph\(bad)one"] }),
                ] + ["report_id", "device_id", "product_id", "original_transaction_id", "transaction_id", "signed_transaction", "signed_renewal_info"].map { field in
                    ("reports[0].\(field)", { body in
                        var reports = body["reports"] as? [[String: Any]] ?? []
                        reports[0][field] = "x\(bad)y"
                        body["reports"] = reports
                    })
                }
                for (path, set) in fields {
                    var body: [String: Any] = [
                        "device": ["id": "iphone", "platform": "ios", "app_version": "1.0"],
                        "reports": [[
                            "report_id": "r1", "observed_at": "2026-01-01T00:00:00Z", "product_id": "voip.basic.monthly",
                            "original_transaction_id": "t1", "transaction_id": "t1", "purchased_at": "2026-01-01T00:00:00Z",
                        ]],
                    ]
                    set(&body)
                    let data = try JSONSerialization.data(withJSONObject: body)
                    let result = try await client.sync(account: "hostile", body: data, waitMilliseconds: nil)
                    #expect(result.status == .badRequest, "\(path): \(result.status)")
                    #expect(result.json.errorCode == "invalid_request", "\(path)")
                    #expect(result.json.errorMessage?.contains(path) == true, "\(path): \(result.json.errorMessage ?? "")")
                }
                #expect(try await env.count("reports", accountID: "hostile") == 0)
                #expect(try await env.count("devices", accountID: "hostile") == 0)
                // The App Store notification route too, configured or not.
                let notification = try JSONSerialization.data(withJSONObject: ["signedPayload": "a.b\(bad).c"])
                let answer = try await client.postJSON("/v1/notifications/apple", body: notification, credential: nil)
                #expect(answer.status == .badRequest)
                #expect(answer.json.errorMessage?.contains("signedPayload") == true)
            }
        }
    }

    @Test("placeholder account ids are refused", arguments: ["null", "undefined", "anonymous", "0", "-1", "NULL", "None"])
    func blockedAccountIDs(id: String) async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application(workers: 0).test(.router) { client in
                let result = try await client.sync(account: id, body: try SyncBody(device: "iphone", reports: [TestReports.report("r")]).data, waitMilliseconds: nil)
                #expect(result.status == .badRequest)
                #expect(result.json.errorCode == "blocked_account_id")
                #expect(try await client.getJSON("/v1/accounts/\(id)").status == .badRequest)
                #expect(try await env.count("reports", accountID: id) == 0)
            }
        }
    }

    @Test("\"[object Object]\" in a path is refused as a bad id")
    func objectObject() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application(workers: 0).test(.router) { client in
                let result = try await client.getJSON("/v1/accounts/%5Bobject%20Object%5D")
                #expect(result.status == .badRequest)
                #expect(["invalid_account_id", "blocked_account_id"].contains(result.json.errorCode ?? ""))
            }
        }
    }

    @Test("rate limit settings parse and reject nonsense")
    func parsing() throws {
        let perMinute = try RateLimiter.Limit(parsing: "120/m", variable: "X")
        #expect(perMinute.ratePerSecond == 2)
        #expect(perMinute.burst == 60)
        let withBurst = try RateLimiter.Limit(parsing: "5/s,burst=20", variable: "X")
        #expect(withBurst == RateLimiter.Limit(ratePerSecond: 5, burst: 20))
        for bad in ["fast", "10/h", "0/s", "5/s,burst=0", "5/s,jitter=1"] {
            #expect(throws: ConfigurationError.self) { try RateLimiter.Limit(parsing: bad, variable: "X") }
        }
    }
}
