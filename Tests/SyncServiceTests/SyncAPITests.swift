import Foundation
import Hummingbird
import HummingbirdTesting
import Postgres
import SyncCore
import SyncService
import TestSupport
import Testing

/// The sync API end to end: real HTTP, a real database, real workers.
@Suite("Sync API")
struct SyncAPITests {
    @Test("sync with wait_ms answers 202 with the state after the reports (read-your-writes)")
    func syncAndReadYourWrites() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application().testLive { client in
                let body = try SyncBody(device: "iphone", reports: [TestReports.report("r1")]).data
                let (status, json) = try await client.sync(account: "alice", body: body, waitMilliseconds: 60_000)
                #expect(status == .accepted)
                #expect(json["accepted"] as? Int == 1)
                #expect(json["duplicates"] as? Int == 0)
                #expect(json["resolved"] as? Bool == true)
                let account = try #require(json["account"] as? [String: Any])
                #expect(account["tier"] as? String == "premium")
                #expect(account["ads"] as? Bool == false)
                #expect(TestReports.entitlement(json, "premium")?["status"] as? String == "active")
                #expect((account["devices"] as? [[String: Any]])?.first?["id"] as? String == "iphone")

                let (readStatus, read) = try await client.getJSON("/v1/accounts/alice")
                #expect(readStatus == .ok)
                #expect(read["tier"] as? String == "premium")
                #expect(read["last_sequence"] as? Int == 2)  // activated + tier_changed
            }
        }
    }

    @Test("without wait_ms, resolved says whether this request's reports are resolved, whatever else of the account is pending")
    func resolvedWithoutWaiting() async throws {
        try await TestEnvironment.withFresh { env in
            let first = try SyncBody(device: "iphone", reports: [TestReports.report("r1"), TestReports.report("r2", observed: 60)]).data
            // No workers: the reports stay pending.
            try await env.application(workers: 0).test(.router) { client in
                let (status, json) = try await client.sync(account: "erin", body: first, waitMilliseconds: nil)
                #expect(status == .accepted)
                #expect(json["accepted"] as? Int == 2)
                #expect(json["resolved"] as? Bool == false)
                #expect((json["account"] as? [String: Any])?["pending_reports"] as? Int == 2)
            }
            // Workers resolve them.
            try await env.application().testLive { client in
                let (_, json) = try await client.sync(account: "erin", body: first, waitMilliseconds: 60_000)
                #expect(json["duplicates"] as? Int == 2)
                #expect(json["resolved"] as? Bool == true)
            }
            try await env.application(workers: 0).test(.router) { client in
                // Another device's new report is pending; the first request's reports are not.
                let other = try SyncBody(device: "ipad", reports: [TestReports.report("r3", device: "ipad", observed: 120)]).data
                let (_, pending) = try await client.sync(account: "erin", body: other, waitMilliseconds: nil)
                #expect(pending["resolved"] as? Bool == false)
                let (_, again) = try await client.sync(account: "erin", body: first, waitMilliseconds: nil)
                #expect(again["duplicates"] as? Int == 2)
                #expect(again["resolved"] as? Bool == true)
                #expect((again["account"] as? [String: Any])?["pending_reports"] as? Int == 1)
            }
        }
    }

    @Test("resubmitting the same reports is idempotent")
    func idempotentResubmission() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application().testLive { client in
                let body = try SyncBody(device: "iphone", reports: [TestReports.report("r1"), TestReports.report("r2", observed: 60)]).data
                let first = try await client.sync(account: "bob", body: body)
                let second = try await client.sync(account: "bob", body: body)
                #expect(first.json["accepted"] as? Int == 2)
                #expect(second.json["accepted"] as? Int == 0)
                #expect(second.json["duplicates"] as? Int == 2)
                #expect(try await env.count("reports", accountID: "bob") == 2)
                // The second submission changed nothing, so no new events.
                let events = try await env.count("events", accountID: "bob")
                #expect(events == 2)
            }
        }
    }

    @Test("a stale iPad report after an iPhone renewal does not shorten access")
    func staleDeviceAfterRenewal() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application().testLive { client in
                let renewal = TestReports.report("renewal", device: "iphone", transaction: "t2", purchased: 0, expires: 30 * 86_400, observed: 10)
                _ = try await client.sync(account: "carol", body: try SyncBody(device: "iphone", reports: [TestReports.report("first"), renewal]).data)
                let stale = TestReports.report("stale", device: "ipad", transaction: "t1", expires: 29 * 86_400, observed: 20)
                let (_, json) = try await client.sync(account: "carol", body: try SyncBody(device: "ipad", reports: [stale]).data)
                let premium = try #require(TestReports.entitlement(json, "premium"))
                #expect(premium["status"] as? String == "active")
                #expect(premium["source_transaction_id"] as? String == "t2")
            }
        }
    }

    @Test("a refund on one device wins over an older active report from another")
    func refundThenStaleActive() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application().testLive { client in
                _ = try await client.sync(account: "dave", body: try SyncBody(device: "iphone", reports: [TestReports.report("a")]).data)
                let refund = TestReports.report("refund", revoked: -10)
                _ = try await client.sync(account: "dave", body: try SyncBody(device: "iphone", reports: [refund]).data)
                let stale = TestReports.report("stale", device: "ipad", observed: -3600)
                let (_, json) = try await client.sync(account: "dave", body: try SyncBody(device: "ipad", reports: [stale]).data)
                #expect(TestReports.entitlement(json, "premium")?["status"] as? String == "revoked")
                #expect((json["account"] as? [String: Any])?["tier"] as? String == "free")
                let types = try await env.pool.query("SELECT type FROM events WHERE account_id = 'dave' ORDER BY sequence")
                    .map { try $0.decode(String.self, at: 0) }
                #expect(types.contains("entitlement.revoked"))
            }
        }
    }

    @Test("two devices syncing at the same time converge")
    func twoDevicesRacing() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application(workers: 3, batchSize: 5).testLive { client in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for device in ["iphone", "ipad"] {
                        group.addTask {
                            for index in 0..<10 {
                                let report = TestReports.report("\(device)-\(index)", device: device, transaction: "t\(index % 3)",
                                                         purchased: Double(index % 3) * 30 * 86_400 - 86_400,
                                                         expires: Double(index % 3) * 30 * 86_400 + 29 * 86_400, observed: Double(index))
                                _ = try await client.sync(account: "erin", body: try SyncBody(device: device, reports: [report]).data, waitMilliseconds: nil)
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                // Drain, then check against a resolution of the same reports from scratch.
                var json: [String: Any] = [:]
                try await waitUntil {
                    json = try await client.getJSON("/v1/accounts/erin").json
                    return json["pending_reports"] as? Int == 0
                }
                #expect(json["pending_reports"] as? Int == 0)
                let premium = try #require(TestReports.entitlement(json, "premium"))
                #expect(premium["source_transaction_id"] as? String == "t2")
                #expect((json["devices"] as? [[String: Any]])?.count == 2)
            }
        }
    }

    @Test("an unknown account reads as the free tier")
    func unknownAccountIsFree() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application(workers: 0).test(.router) { client in
                let (status, json) = try await client.getJSON("/v1/accounts/nobody")
                #expect(status == .ok)
                #expect(json["tier"] as? String == "free")
                #expect(json["ads"] as? Bool == true)
                #expect((json["entitlements"] as? [Any])?.isEmpty == true)
            }
        }
    }

    @Test("feature checks name the lowest tier that allows the feature")
    func featureCheck() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application().testLive { client in
                _ = try await client.sync(account: "fay", body: try SyncBody(device: "iphone", reports: [TestReports.report("r1", product: "voip.basic.monthly")]).data)
                let (status, json) = try await client.getJSON("/v1/accounts/fay/features/video_calling")
                #expect(status == .ok)
                #expect(json["allowed"] as? Bool == false)
                #expect(json["required_tier"] as? String == "premium")
                let recording = try await client.getJSON("/v1/accounts/fay/features/call_recording").json
                #expect(recording["allowed"] as? Bool == true)
                let unknown = try await client.getJSON("/v1/accounts/fay/features/teleportation")
                #expect(unknown.status == .notFound)
                #expect(unknown.json.errorCode == "unknown_feature")
            }
        }
    }
}
