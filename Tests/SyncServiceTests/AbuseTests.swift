import Foundation
import Hummingbird
import HummingbirdTesting
import Postgres
import SyncCore
import SyncService
import Testing

@Suite("Abuse limits")
struct AbuseTests {
    @Test("a device over its account's rate gets 429 with Retry-After, stores nothing, and recovers")
    func rateLimitTriggersAndRecovers() async throws {
        try await TestEnvironment.withFresh { env in
            // One token per 5 s: the first three requests cannot earn a fourth on a slow machine.
            let limit = RateLimiter.Limit(ratePerSecond: 0.2, burst: 3)
            try await env.application(workers: 0, accountRateLimit: limit).test(.router) { client in
                let token = try await env.token(for: "rita")
                for index in 0..<3 {
                    let body = try SyncBody(device: "iphone", reports: [SyncAPITests.report("r\(index)")]).data
                    #expect(try await client.sync(account: "rita", body: body, credential: token, waitMilliseconds: nil).status == .accepted)
                }
                let limitedBody = try SyncBody(device: "iphone", reports: [SyncAPITests.report("limited")]).data
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
                #expect((1...5).contains(wait))
                #expect(try await env.count("reports", accountID: "rita") == 3)
                // The admin key (the app's backend) is not limited.
                #expect(try await client.sync(account: "rita", body: try SyncBody(device: "backend", reports: [SyncAPITests.report("admin")]).data, waitMilliseconds: nil).status == .accepted)
                // After Retry-After, the device may sync again.
                try await Task.sleep(for: .seconds(wait))
                #expect(try await client.sync(account: "rita", body: limitedBody, credential: token, waitMilliseconds: nil).status == .accepted)
                #expect(try await env.count("reports", accountID: "rita") == 5)
            }
        }
    }

    @Test("per-device limits are separate from the account's")
    func deviceLimit() async throws {
        try await TestEnvironment.withFresh { env in
            let limit = RateLimiter.Limit(ratePerSecond: 0.1, burst: 1)
            try await env.application(workers: 0, deviceRateLimit: limit).test(.router) { client in
                let token = try await env.token(for: "dev")
                let first = try SyncBody(device: "iphone", reports: [SyncAPITests.report("a")]).data
                let second = try SyncBody(device: "iphone", reports: [SyncAPITests.report("b")]).data
                let other = try SyncBody(device: "ipad", reports: [SyncAPITests.report("c")]).data
                #expect(try await client.sync(account: "dev", body: first, credential: token, waitMilliseconds: nil).status == .accepted)
                #expect(try await client.sync(account: "dev", body: second, credential: token, waitMilliseconds: nil).status == .tooManyRequests)
                #expect(try await client.sync(account: "dev", body: other, credential: token, waitMilliseconds: nil).status == .accepted)
            }
        }
    }

    @Test("placeholder account ids are refused", arguments: ["null", "undefined", "anonymous", "0", "-1", "NULL", "None"])
    func blockedAccountIDs(id: String) async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application(workers: 0).test(.router) { client in
                let result = try await client.sync(account: id, body: try SyncBody(device: "iphone", reports: [SyncAPITests.report("r")]).data, waitMilliseconds: nil)
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
