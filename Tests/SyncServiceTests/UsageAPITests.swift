import Foundation
import Hummingbird
import HummingbirdTesting
import Postgres
import SyncCore
import SyncService
import SyncStore
import TestSupport
import Testing

/// Usage and credits against a real database over real HTTP (rules in docs/USAGE.md).
@Suite("Usage API")
struct UsageAPITests {
    static func usageBody(device: String, _ entries: [(id: String, units: Int, at: Date)], meter: String = "minutes") throws -> Data {
        let usage: [[String: Any]] = entries.map { ["id": $0.id, "meter": meter, "units": $0.units, "at": RFC3339.format($0.at)] }
        return try JSONSerialization.data(withJSONObject: ["device": ["id": device], "usage": usage])
    }

    static func minutes(_ json: [String: Any]) -> [String: Any]? {
        ((json["usage"] as? [[String: Any]]) ?? [])
            .first { $0["meter"] as? String == "minutes" }
    }

    @Test("usage from three devices converges: duplicates count once, and what exceeds the balance is overage")
    func threeDevicesConverge() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application().testLive { client in
                let now = Date()
                // Calls of the last hour, but never before the start of this calendar month in UTC:
                // all inside the free tier's current period, whatever today is.
                let minute = { (n: Int) in recentlyThisMonth(Double(n) * 60, now: now) }
                // The three devices have known the service since before these calls.
                try await env.knownDevices(["phone", "web", "tablet"], of: "ana", since: minute(60))
                let phone = try Self.usageBody(device: "phone", [("call-1", 30, minute(50)), ("call-2", 20, minute(40))])
                let (status, first) = try await client.postJSON("/v1/accounts/ana/usage", body: phone)
                #expect(status == .accepted, "\(first)")
                #expect(first["accepted"] as? Int == 2)
                // The phone retries, whole and in part: nothing new.
                let (_, retry) = try await client.postJSON("/v1/accounts/ana/usage", body: phone)
                #expect(retry["accepted"] as? Int == 0)
                #expect(retry["duplicates"] as? Int == 2)
                _ = try await client.postJSON("/v1/accounts/ana/usage", body: try Self.usageBody(device: "phone", [("call-2", 20, minute(40))]))
                // The web client numbers its calls too: its "call-1" is another call.
                let (_, web) = try await client.postJSON("/v1/accounts/ana/usage", body: try Self.usageBody(device: "web", [("call-1", 5, minute(35))]))
                #expect(web["accepted"] as? Int == 1)
                // The tablet was offline; its calls arrive now, in one batch.
                let tablet = try Self.usageBody(device: "tablet", [("call-3", 25, minute(30)), ("call-4", 40, minute(20))])
                let (_, late) = try await client.postJSON("/v1/accounts/ana/usage", body: tablet)
                let balance = try #require(Self.minutes(late))
                #expect(balance["used"] as? Int == 120)
                #expect(balance["allowance"] as? Int == 100)
                #expect(balance["available"] as? Int == 0)
                #expect(balance["overage_units"] as? Int == 20)
                #expect(balance["overage_amount"] as? String == "0.4")
                #expect(try await env.scalar("SELECT count(*) FROM usage_entries WHERE account_id = 'ana' AND kind = 'usage'") == 5)

                // The account read and the usage read agree.
                let (_, account) = try await client.getJSON("/v1/accounts/ana")
                #expect(Self.minutes(account)?["used"] as? Int == 120)
                let (readStatus, read) = try await client.getJSON("/v1/accounts/ana/usage?meter=minutes")
                #expect(readStatus == .ok)
                let meter = try #require((read["meters"] as? [[String: Any]])?.first)
                #expect((meter["entries"] as? [[String: Any]])?.filter { $0["kind"] as? String == "usage" }.count == 5)
                #expect((meter["periods"] as? [[String: Any]])?.first?["overage"] as? Int == 20)
            }
        }
    }

    @Test("bad usage gets a specific 4xx and stores nothing, not even the good entries beside it")
    func badUsageStoresNothing() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application().testLive { client in
                let now = Date()
                let good = (id: "ok-1", units: 5, at: now.addingTimeInterval(-60))
                _ = try await client.postJSON("/v1/accounts/bo/usage", body: try Self.usageBody(device: "phone", [good]))
                let before = try await env.scalar("SELECT count(*) FROM usage_entries WHERE account_id = 'bo'")
                let cases: [(Data, HTTPResponse.Status, String)] = [
                    (try Self.usageBody(device: "phone", [("n1", 3, now), ("n2", -4, now)]), .unprocessableContent, "invalid_units"),
                    (try Self.usageBody(device: "phone", [("z1", 0, now)]), .unprocessableContent, "invalid_units"),
                    (try Self.usageBody(device: "phone", [("h1", 2_000_000_000, now)]), .unprocessableContent, "invalid_units"),
                    (try Self.usageBody(device: "phone", [("m1", 3, now)], meter: "sms"), .unprocessableContent, "unknown_meter"),
                    (try Self.usageBody(device: "phone", [("d1", 3, now.addingTimeInterval(-200 * 86_400))]), .unprocessableContent, "invalid_time"),
                    (try Self.usageBody(device: "phone", [("d2", 3, now.addingTimeInterval(86_400))]), .unprocessableContent, "invalid_time"),
                    (try Self.usageBody(device: "phone", [("bad id", 3, now)]), .badRequest, "invalid_request"),
                    (try Self.usageBody(device: "phone", []), .unprocessableContent, "invalid_usage"),
                    (try Self.usageBody(device: "phone", [("c1", 3, now), ("c1", 4, now)]), .conflict, "usage_conflict"),
                    // The id is stored with other units: the whole batch is refused.
                    (try Self.usageBody(device: "phone", [("new-1", 3, now), ("ok-1", 6, good.at)]), .conflict, "usage_conflict"),
                    (Data("{\"device\": {\"id\": \"phone\"}, \"usage\": [{\"id\": \"x\", \"meter\": \"minutes\", \"units\": \"ten\", \"at\": \"2026-01-01T00:00:00Z\"}]}".utf8),
                     .badRequest, "invalid_request"),
                ]
                for (body, status, code) in cases {
                    let (answer, json) = try await client.postJSON("/v1/accounts/bo/usage", body: body)
                    #expect(answer == status, "\(json)")
                    #expect(json.errorCode == code, "\(json)")
                }
                #expect(try await env.scalar("SELECT count(*) FROM usage_entries WHERE account_id = 'bo'") == before)
                let (periodStatus, periodJSON) = try await client.getJSON("/v1/accounts/bo/usage?period=yesterday")
                #expect(periodStatus == .badRequest, "\(periodJSON)")
                let (otherStatus, _) = try await client.postJSON(
                    "/v1/accounts/bo/usage", body: try Self.usageBody(device: "phone", [("t1", 1, now)]), credential: "wrong-key-wrong-key")
                #expect(otherStatus == .unauthorized)
            }
        }
    }

    @Test("devices write only their own account's usage, within the account's rate limit; reads are not limited")
    func devicesAreLimitedToTheirAccount() async throws {
        try await TestEnvironment.withFresh { env in
            let limit = RateLimiter.Limit(ratePerSecond: 0.001, burst: 2)
            try await env.application(accountRateLimit: limit).testLive { client in
                let token = try await env.token(for: "tia")
                let body = { (id: String) in try Self.usageBody(device: "phone", [(id, 1, Date().addingTimeInterval(-60))]) }
                for id in ["a", "b"] {
                    let (status, json) = try await client.postJSON("/v1/accounts/tia/usage", body: try body(id), credential: token)
                    #expect(status == .accepted, "\(json)")
                }
                let (limited, limitedJSON) = try await client.postJSON("/v1/accounts/tia/usage", body: try body("c"), credential: token)
                #expect(limited == .tooManyRequests)
                #expect(limitedJSON.errorCode == "rate_limited")
                let (held, _) = try await client.postJSON("/v1/accounts/tia/usage/holds", body: try UsageHoldTests.holdBody(device: "phone", units: 1), credential: token)
                #expect(held == .tooManyRequests)
                let (read, _) = try await client.getJSON("/v1/accounts/tia/usage", credential: token)
                #expect(read == .ok)
                let (other, _) = try await client.postJSON("/v1/accounts/ulf/usage", body: try body("d"), credential: token)
                #expect(other == .forbidden)
                // The backend's admin key is not limited.
                let (admin, _) = try await client.postJSON("/v1/accounts/tia/usage", body: try body("e"))
                #expect(admin == .accepted)
                #expect(try await env.scalar("SELECT count(*) FROM usage_entries WHERE kind = 'usage'") == 3)
            }
        }
    }

    @Test("a subscription's allowance follows its purchase day and its tier")
    func subscriptionAllowance() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application().testLive { client in
                let purchased = TestReports.start.addingTimeInterval(-3 * 86_400)
                let report = TestReports.report("b1", product: "voip.basic.monthly", purchased: -3 * 86_400, expires: 27 * 86_400)
                _ = try await client.sync(account: "cy", body: try SyncBody(device: "phone", reports: [report]).data)
                let (_, answer) = try await client.postJSON(
                    "/v1/accounts/cy/usage", body: try Self.usageBody(device: "phone", [("c1", 400, Date().addingTimeInterval(-60))]))
                let balance = try #require(Self.minutes(answer))
                #expect(balance["allowance"] as? Int == 1_000)
                #expect(balance["available"] as? Int == 600)
                #expect(balance["period_start"] as? String == RFC3339.format(purchased))

                // An upgrade to premium in the same period: unlimited for the rest of it.
                let premium = TestReports.report("p1", transaction: "t2", product: "voip.premium.monthly", purchased: -3 * 86_400, expires: 27 * 86_400)
                _ = try await client.sync(account: "cy", body: try SyncBody(device: "phone", reports: [premium]).data)
                let (_, read) = try await client.getJSON("/v1/accounts/cy")
                let upgraded = try #require(Self.minutes(read))
                #expect(upgraded["allowance"] is NSNull)
                #expect(upgraded["available"] is NSNull)
                #expect(upgraded["used"] as? Int == 400)
            }
        }
    }

    @Test("a verified minute pack is credited once however often it is reported, its refund is debited even when spent, a reversal gives it back")
    func consumableCreditsAndRefunds() async throws {
        try await TestEnvironment.withFresh { env in
            let now = Date()
            let engine = ResolutionEngine(pool: env.pool, catalogue: .default)
            func pack(_ id: String, device: String, revoked: Date? = nil, verified: Bool = true) -> Report {
                Report(
                    reportID: id, deviceID: device, observedAt: now, productID: "voip.credits.100", originalTransactionID: "pack1",
                    transactionID: "pack1", purchasedAt: now.addingTimeInterval(-600), revokedAt: revoked,
                    trust: verified ? .verified(signedDate: revoked ?? now.addingTimeInterval(-600)) : .unverifiedDevice)
            }
            func resolve(_ reports: [Report]) async throws {
                _ = try await env.pool.withTransaction { connection in
                    try await engine.resolve(accounts: ["di"], newReports: ["di": reports], origin: .worker, on: connection)
                }
            }
            let ledger = UsageLedger(pool: env.pool, catalogue: .default)
            // An unverified report of the pack mints nothing.
            try await resolve([Report(
                reportID: "forged", deviceID: "x", observedAt: now, productID: "voip.credits.100", originalTransactionID: "pack9",
                transactionID: "pack9", purchasedAt: now.addingTimeInterval(-600))])
            #expect(try await ledger.balances(of: "di", now: now).first?.credits == 0)
            // Reported by three devices, twice each.
            for device in ["phone", "tablet", "web", "phone", "tablet", "web"] {
                try await resolve([pack("r-\(device)-\(UUID())", device: device)])
            }
            #expect(try await ledger.balances(of: "di", now: now).first?.credits == 100)
            // 180 minutes on the free tier: 100 from the allowance, 80 from the pack.
            _ = try await ledger.submit(
                [UsageEntry(id: "usage:call", meter: "minutes", kind: .usage, units: 180, at: now.addingTimeInterval(-300))],
                accountID: "di", device: DeviceInfo(id: "phone"), now: now)
            #expect(try await ledger.balances(of: "di", now: now).first?.credits == 20)
            // Refunded: the 100 minutes are taken back, 80 of them already spent.
            try await resolve([pack("refund", device: "store", revoked: now.addingTimeInterval(-60))])
            let refunded = try #require(try await ledger.balances(of: "di", now: now).first)
            #expect(refunded.credits == -80)
            #expect(refunded.available == 0)
            #expect(try await env.scalar("SELECT count(*) FROM usage_entries WHERE account_id = 'di' AND kind = 'credit_revoked'") == 1)
            // One credits.granted and one credits.revoked, however often the pack was reported,
            // in the account's one sequence (no gap, no repeat).
            #expect(try await env.scalar("SELECT count(*) FROM events WHERE account_id = 'di' AND type = 'credits.granted'") == 1)
            #expect(try await env.scalar("SELECT count(*) FROM events WHERE account_id = 'di' AND type = 'credits.revoked'") == 1)
            #expect(try await env.scalar(
                "SELECT count(*) FROM events WHERE account_id = 'di' AND type = 'credits.revoked' AND payload->'credit'->>'units' = '100' AND payload->'credit'->>'transaction_id' = 'pack1'") == 1)
            // The refund is reversed (REFUND_REVERSED: the App Store's signed transaction again,
            // without revocation, signed after the refund): the 100 minutes come back, and the
            // 80 owed are repaid from them.
            func reversal(_ id: String, at: Date) -> Report {
                Report(
                    reportID: id, deviceID: "store", observedAt: at, productID: "voip.credits.100", originalTransactionID: "pack1",
                    transactionID: "pack1", purchasedAt: now.addingTimeInterval(-600), trust: .verified(signedDate: at, source: .store))
            }
            try await resolve([reversal("reversed", at: now.addingTimeInterval(-30))])
            #expect(try await ledger.balances(of: "di", now: now).first?.credits == 20)
            #expect(try await env.scalar("SELECT count(*) FROM usage_entries WHERE account_id = 'di' AND kind = 'credit_restored'") == 1)
            #expect(try await env.scalar(
                "SELECT count(*) FROM events WHERE account_id = 'di' AND type = 'credits.granted' AND payload->'credit'->>'transaction_id' = 'pack1' AND payload->'credit'->>'entry_id' LIKE 'credit_restored:pack1#%'") == 1)
            // Reported again, nothing changes.
            try await resolve([reversal("reversed-again", at: now.addingTimeInterval(-30))])
            #expect(try await env.scalar("SELECT count(*) FROM usage_entries WHERE account_id = 'di' AND kind LIKE 'credit%'") == 3)
            // Refunded once more: taken back again.
            try await resolve([pack("refund-2", device: "store", revoked: now.addingTimeInterval(-10))])
            #expect(try await ledger.balances(of: "di", now: now).first?.credits == -80)
            #expect(try await env.scalar("SELECT count(*) FROM events WHERE account_id = 'di' AND type = 'credits.revoked'") == 2)
            #expect(try await env.scalar("SELECT count(*) FROM events WHERE account_id = 'di' AND type = 'credits.granted'") == 2)

            let sequences = try await env.pool.query("SELECT sequence FROM events WHERE account_id = 'di' ORDER BY sequence").map { try $0.decode(Int64.self, at: 0) }
            #expect(sequences == Array(1...Int64(sequences.count)))
            #expect(try await env.scalar("SELECT last_sequence::int FROM account_states WHERE account_id = 'di'") == sequences.count)
        }
    }
}
