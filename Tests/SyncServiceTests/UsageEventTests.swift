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

/// The usage events (docs/USAGE.md "Events") against a real database, real HTTP and
/// a real webhook receiver that checks every signature.
@Suite("Usage events", .serialized)
struct UsageEventTests {
    /// The account's events in sequence order: (sequence, type, payload).
    static func events(_ env: TestEnvironment, _ account: String) async throws -> [(sequence: Int, type: String, payload: [String: Any])] {
        try await env.pool.query("SELECT sequence, type, payload::text FROM events WHERE account_id = \(account) ORDER BY sequence").map {
            let payload = try JSONSerialization.jsonObject(with: Data(try $0.decode(String.self, at: 2).utf8)) as? [String: Any] ?? [:]
            return (try $0.decode(Int.self, at: 0), try $0.decode(String.self, at: 1), payload)
        }
    }

    /// Sequences 1, 2, 3, ... with no gap, and the account's counter at the last one.
    static func expectGapFree(_ env: TestEnvironment, _ account: String) async throws {
        let sequences = try await events(env, account).map(\.sequence)
        #expect(sequences == (0..<sequences.count).map { $0 + 1 })
        #expect(try await env.scalar("SELECT last_sequence::int FROM account_states WHERE account_id = '\(account)'") == sequences.count)
    }

    @Test("usage.low and usage.exhausted fire once each, from device usage and a settled hold, and reach the backend signed")
    func thresholdsReachTheBackend() async throws {
        let receiver = try await WebhookReceiver()
        try await TestEnvironment.withFresh { env in
            let (_, secret) = try await EndpointStore(pool: env.pool).create(url: receiver.url("/usage"), eventTypes: ["usage.low", "usage.exhausted"])
            try await receiver.setSecrets([secret.text])
            try await env.application(deliveryWorkers: 1, webhookGuard: WebhookDeliveryTests.loopback).testLive { client in
                let at = recentlyThisMonth(120)
                // 85 of the free tier's 100 minutes: 15 left, above the 10 % threshold.
                let (first, _) = try await client.postJSON("/v1/accounts/lea/usage", body: try UsageAPITests.usageBody(device: "phone", [("c1", 85, at)]))
                #expect(first == .accepted)
                #expect(try await Self.events(env, "lea").isEmpty)
                // 6 more from the tablet: 9 left.
                let tablet = try UsageAPITests.usageBody(device: "tablet", [("c1", 6, at)])
                _ = try await client.postJSON("/v1/accounts/lea/usage", body: tablet)
                _ = try await client.postJSON("/v1/accounts/lea/usage", body: tablet)  // a retry: nothing new
                _ = try await client.postJSON("/v1/accounts/lea/usage", body: try UsageAPITests.usageBody(device: "web", [("w1", 1, at)]))
                var events = try await Self.events(env, "lea")
                #expect(events.map(\.type) == ["usage.low"], "still low after more usage: no second usage.low")
                let low = try #require(events.first?.payload["usage"] as? [String: Any])
                #expect(low["available"] as? Int == 9)
                #expect(low["threshold"] as? Int == 10)
                #expect(low["meter"] as? String == "minutes")
                #expect(low["revision"] is NSNull)

                // The phone holds the last 8 minutes, and its call took 11: exhausted, 3 of overage.
                let (held, hold) = try await client.postJSON("/v1/accounts/lea/usage/holds", body: try UsageHoldTests.holdBody(device: "phone", units: 20))
                #expect(held == .created, "\(hold)")
                #expect(hold["granted"] as? Int == 8)
                let holdID = try #require((hold["hold"] as? [String: Any])?["id"] as? String)
                let (settled, _) = try await client.postJSON(
                    "/v1/accounts/lea/usage/holds/\(holdID)/settle", body: try JSONSerialization.data(withJSONObject: ["units": 11]))
                #expect(settled == .ok)
                events = try await Self.events(env, "lea")
                #expect(events.map(\.type) == ["usage.low", "usage.exhausted"])
                let exhausted = try #require(events.last?.payload["usage"] as? [String: Any])
                #expect(exhausted["available"] as? Int == 0)
                #expect(exhausted["used"] as? Int == 103)
                #expect(exhausted["overage_units"] as? Int == 3)
                #expect(exhausted["overage_amount"] as? String == "0.06")
                #expect(try await env.scalar("SELECT count(*) FROM events WHERE account_id = 'lea' AND origin = 'usage'") == 2)
                try await Self.expectGapFree(env, "lea")

                // Both reach the backend once, verified by standardwebhooks, as the stored events.
                let ids = try await env.pool.query("SELECT event_id::text FROM events WHERE account_id = 'lea' ORDER BY sequence").map { try $0.decode(String.self, at: 0) }
                let received = try await receiver.waitFor { $0.count >= 2 }
                #expect(received.map(\.id) == ids)
                #expect(received.allSatisfy { !$0.verifiedBy.isEmpty }, "standardwebhooks rejected a signature")
                #expect(received.compactMap(\.body?.type) == ["usage.low", "usage.exhausted"])
            }
        }
    }

    @Test("a period with usage closes when it ends (the sweeper), and closes again with the next revision, announced by the next sweep, when late usage changes it")
    func periodsCloseOnTheSweeper() async throws {
        try await TestEnvironment.withFresh { env in
            let clock = ManualClock()
            let used = clock.now().addingTimeInterval(-1)
            let month = UsagePeriod.containing(used, anchor: Date(timeIntervalSince1970: 0), length: try #require(ISODuration("P1M")))
            try await env.application(clock: clock).testLive { client in
                _ = try await client.postJSON("/v1/accounts/max/usage", body: try UsageAPITests.usageBody(device: "phone", [("c1", 120, used)]))
                #expect(try await Self.events(env, "max").map(\.type) == ["usage.low", "usage.exhausted"])

                // The month ends; the sweeper (on the same clock) closes it.
                clock.advance(by: .seconds(month.end.timeIntervalSince(clock.now()) + 1))
                let closedOnce = try await waitUntil(seconds: 120) {
                    clock.advance(by: .seconds(1))
                    return try await env.scalar("SELECT count(*) FROM events WHERE account_id = 'max' AND type = 'usage.period_closed'") == 1
                }
                #expect(closedOnce)
                var events = try await Self.events(env, "max")
                let closed = try #require(events.last?.payload["usage"] as? [String: Any])
                #expect(events.last?.type == "usage.period_closed")
                #expect(closed["period_start"] as? String == RFC3339.format(month.start))
                #expect(closed["period_end"] as? String == RFC3339.format(month.end))
                #expect(closed["used"] as? Int == 120)
                #expect(closed["from_allowance"] as? Int == 100)
                #expect(closed["overage_units"] as? Int == 20)
                #expect(closed["overage_amount"] as? String == "0.4")
                #expect(closed["currency"] as? String == "USD")
                #expect(closed["revision"] as? Int == 1)
                #expect(try await env.scalar("SELECT count(*) FROM events WHERE account_id = 'max' AND origin = 'sweeper'") == 1)

                // The tablet (known since the month began) was offline: its call of that month
                // arrives now. The write marks the revision due; the next sweep announces it.
                let late = month.start.addingTimeInterval(86_400)
                try await env.knownDevices(["tablet"], of: "max", since: month.start)
                let (status, answer) = try await client.postJSON("/v1/accounts/max/usage", body: try UsageAPITests.usageBody(device: "tablet", [("t1", 10, late)]))
                #expect(status == .accepted, "\(answer)")
                #expect(try await env.scalar("SELECT count(*) FROM usage_periods WHERE account_id = 'max' AND revision_due") == 1)
                let revisedOnce = try await waitUntil(seconds: 300) {
                    clock.advance(by: .seconds(1))
                    return try await env.scalar("SELECT count(*) FROM events WHERE account_id = 'max' AND type = 'usage.period_closed'") == 2
                }
                #expect(revisedOnce)
                events = try await Self.events(env, "max")
                #expect(events.map(\.type) == ["usage.low", "usage.exhausted", "usage.period_closed", "usage.period_closed"])
                let revised = try #require(events.last?.payload["usage"] as? [String: Any])
                #expect(revised["revision"] as? Int == 2)
                #expect(revised["used"] as? Int == 130)
                #expect(revised["overage_units"] as? Int == 30)
                #expect(try await env.scalar("SELECT count(*) FROM events WHERE account_id = 'max' AND origin = 'sweeper'") == 2)
                #expect(try await env.scalar("SELECT count(*) FROM usage_periods WHERE account_id = 'max' AND revision_due") == 0)

                // Time goes on: nothing is closed twice, and the new month had no usage.
                clock.advance(by: .seconds(3_600))
                #expect(await clock.waitForSleepers(atLeast: 1))
                #expect(try await env.scalar("SELECT count(*) FROM events WHERE account_id = 'max' AND type = 'usage.period_closed'") == 2)
                #expect(try await env.scalar("SELECT count(*) FROM usage_periods WHERE account_id = 'max' AND closed_revision = 0") == 0)
                try await Self.expectGapFree(env, "max")
            }
        }
    }

    @Test("rewarded ads and operators' adjustments announce their credits once, audited, in the account's sequence")
    func rewardsAndAdjustmentsAnnounceCredits() async throws {
        try await TestEnvironment.withFresh { env in
            let ledger = UsageLedger(pool: env.pool, catalogue: .default)
            let now = Date()
            #expect(try await ledger.reward(
                accountID: "ida", network: "admob", transactionID: "ad-1", meter: "minutes", units: 10, cap: 30, at: now, now: now) == .granted)
            #expect(try await ledger.reward(
                accountID: "ida", network: "admob", transactionID: "ad-1", meter: "minutes", units: 10, cap: 30, at: now, now: now) == .replayed)
            let grant = try await ledger.adjust(accountID: "ida", meter: "minutes", units: 50, id: "T-1", actor: "sam", reason: "outage", now: now)
            #expect(grant.recorded)
            // The operator's retry of the same ticket: nothing new, no second event.
            #expect(try await ledger.adjust(accountID: "ida", meter: "minutes", units: 50, id: "T-1", actor: "sam", reason: "outage", now: now).recorded == false)
            _ = try await ledger.adjust(accountID: "ida", meter: "minutes", units: -30, id: "T-2", actor: "sam", reason: "chargeback", now: now)

            let events = try await Self.events(env, "ida")
            #expect(events.map(\.type) == ["credits.granted", "credits.granted", "credits.revoked"])
            let credits = events.compactMap { $0.payload["credit"] as? [String: Any] }
            #expect(credits.map { $0["source"] as? String } == ["reward", "adjustment", "adjustment"])
            #expect(credits.map { $0["units"] as? Int } == [10, 50, 30])
            #expect(credits.map { $0["entry_id"] as? String } == ["reward:admob:ad-1", "adjustment:T-1", "adjustment:T-2"])
            #expect(credits[0]["transaction_id"] as? String == "ad-1")
            #expect(credits[1]["transaction_id"] is NSNull)
            #expect(credits[1]["actor"] as? String == "sam")
            #expect(credits[2]["reason"] as? String == "chargeback")
            #expect(events.map { $0.payload["state"] != nil } == [true, true, true])
            #expect(try await env.scalar("SELECT count(*) FROM events WHERE account_id = 'ida' AND origin = 'reward'") == 1)
            #expect(try await env.scalar("SELECT count(*) FROM events WHERE account_id = 'ida' AND origin = 'admin'") == 2)
            try await Self.expectGapFree(env, "ida")
        }
    }

    @Test("a refund that takes back spent minutes exhausts the account in the resolving transaction, after its credits.revoked")
    func refundExhausts() async throws {
        try await TestEnvironment.withFresh { env in
            let now = Date()
            let engine = ResolutionEngine(pool: env.pool, catalogue: .default)
            func pack(_ id: String, revoked: Date? = nil) -> Report {
                Report(
                    reportID: id, deviceID: "phone", observedAt: now, productID: "voip.credits.100", originalTransactionID: "pk",
                    transactionID: "pk", purchasedAt: now.addingTimeInterval(-600), revokedAt: revoked,
                    trust: .verified(signedDate: revoked ?? now.addingTimeInterval(-600)))
            }
            func resolve(_ report: Report) async throws {
                _ = try await env.pool.withTransaction { connection in
                    try await engine.resolve(accounts: ["rio"], newReports: ["rio": [report]], origin: .worker, on: connection)
                }
            }
            try await resolve(pack("bought"))
            _ = try await UsageLedger(pool: env.pool, catalogue: .default).submit(
                [UsageEntry(id: "usage:phone:c1", meter: "minutes", kind: .usage, units: 150, at: now.addingTimeInterval(-300))],
                accountID: "rio", device: DeviceInfo(id: "phone"), now: now)
            #expect(try await Self.events(env, "rio").map(\.type).filter { $0.hasPrefix("usage.") }.isEmpty, "50 of the pack left")
            try await resolve(pack("refunded", revoked: now.addingTimeInterval(-60)))
            let types = try await Self.events(env, "rio").map(\.type)
            #expect(Array(types.suffix(3)) == ["credits.revoked", "usage.low", "usage.exhausted"])
            try await Self.expectGapFree(env, "rio")
        }
    }
}
