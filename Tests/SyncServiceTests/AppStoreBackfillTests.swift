import Foundation
import Postgres
import SyncCore
@testable import SyncService
import SyncStore
import TestSupport
import Testing

/// The backfill of missed App Store notifications (docs/STORE.md "Backfill") with the
/// service's own services running (`.live`) against the store double.
@Suite("App Store notification backfill", .serialized)
struct AppStoreBackfillTests {
    /// The code `POST /v1/notifications/apple` runs, as the application builds it.
    static func notifications(_ env: TestEnvironment, verifier: StoreKitVerifier) -> NotificationController {
        let engine = ResolutionEngine(pool: env.pool, catalogue: .default)
        return NotificationController(
            verifier: verifier, binder: TransactionBinder(pool: env.pool, engine: engine, policy: .reject),
            store: AppStoreNotificationStore(pool: env.pool), tokens: AppAccountTokens(key: nil), limiter: nil, arrivals: WakeSignal(),
            logger: env.logger)
    }

    @Test("a refund whose notification was lost is applied by the next backfill, once; the checkpoint moves, overlapping, and survives a new process")
    func lostRefund() async throws {
        try await TestEnvironment.withFresh { env in
            let trust = try StoreKitTrust()
            let double = try await AppStoreDouble(bundleID: StoreKitTrust.bundleID)
            let now = Date()
            let clock = ManualClock(start: now)
            let purchased = now.addingTimeInterval(-86_400)
            let expires = now.addingTimeInterval(29 * 86_400)
            // Apple's record: nothing at first, then the REFUND the service never received
            // (repeated on every later ask, as the window overlaps).
            let refundUUID = UUID()
            let body = try trust.notification("REFUND", uuid: refundUUID, transaction: StoreKitTrust.transaction(
                original: "t-lost", purchased: purchased, expires: expires, signed: now.addingTimeInterval(60),
                revoked: now.addingTimeInterval(30)), signed: now.addingTimeInterval(60))
            let signedPayload = try #require((try JSONSerialization.jsonObject(with: body) as? [String: Any])?["signedPayload"] as? String)
            let empty = AppStoreDouble.Answer(json: ["hasMore": false, "notificationHistory": []])
            try await double.script("POST", "/inApps/v1/notifications/history", [
                empty, empty,
                AppStoreDouble.Answer(json: ["hasMore": false, "notificationHistory": [["signedPayload": .string(signedPayload)]]]),
            ])
            let api = try AppStoreDouble.client(double)
            let app = try env.application(workers: 1, requireSigned: true, verifier: trust.verifier, clock: clock, appStoreAPI: api)
            try await app.testLive { client in
                let jws = try trust.authority.sign(StoreKitTrust.transaction(original: "t-lost", purchased: purchased, expires: expires, signed: now))
                let (status, _) = try await client.sync(account: "lost", body: try StoreKitTrust.signedBody(reportID: "p1", jws: jws))
                #expect(status == .accepted)
                #expect(trust.entitlementStatus(try await trust.settled(client, "lost")) == "active")

                // The first run (at start) asked from a day back (less the overlap), a day at a
                // time, and found nothing.
                let nearlyNow = RFC3339.format(now.addingTimeInterval(-300))
                #expect(try await waitUntil {
                    try await env.scalar("SELECT count(*) FROM store_backfill WHERE checkpoint > '\(nearlyNow)'::timestamptz") == 1
                })
                let windows = try await double.requests().map { request in
                    try #require(try JSONSerialization.jsonObject(with: Data(request.body.utf8)) as? [String: Int64])
                }
                #expect(windows.map { $0["startDate"] } == [
                    AppStoreServerAPI.milliseconds(now.addingTimeInterval(-86_400 - 600)), AppStoreServerAPI.milliseconds(now.addingTimeInterval(-600)),
                ])
                #expect(windows.map { $0["endDate"] } == [
                    AppStoreServerAPI.milliseconds(now.addingTimeInterval(-600)), AppStoreServerAPI.milliseconds(now),
                ])

                // An interval later the next run finds the refund: revoked, announced once.
                #expect(await clock.waitForSleeper(forAtLeast: .seconds(3_500)))
                clock.advance(by: .seconds(3_600))
                #expect(try await waitUntil { trust.entitlementStatus(try await trust.settled(client, "lost")) == "revoked" })
                #expect(try await trust.notificationAccount(env, refundUUID) == "lost")
                let second = try await double.requests()
                #expect(second.count == 3)
                let secondWindow = try #require(try JSONSerialization.jsonObject(with: Data((second.last?.body ?? "").utf8)) as? [String: Int64])
                #expect(secondWindow["startDate"] == AppStoreServerAPI.milliseconds(now.addingTimeInterval(-600)), "from the checkpoint, less the overlap")

                // Once more: the same notification is a duplicate, no second event.
                #expect(await clock.waitForSleeper(forAtLeast: .seconds(3_500)))
                clock.advance(by: .seconds(3_600))
                #expect(try await waitUntil { try await double.requests().count == 4 })
                #expect(try await waitUntil {
                    try await env.scalar("SELECT count(*) FROM store_backfill WHERE notifications = 2 AND lease_owner IS NOT NULL") == 1
                })
            }
            #expect(try await env.scalar("SELECT count(*) FROM events WHERE account_id = 'lost' AND type = 'entitlement.revoked'") == 1)
            #expect(try await env.scalar("SELECT count(*) FROM reports WHERE account_id = 'lost' AND source = 'store'") == 1)
            // A stopped process gave its lease up; a new one resumes from the checkpoint.
            #expect(try await env.scalar("SELECT count(*) FROM store_backfill WHERE lease_owner IS NULL") == 1)
            let checkpoints = AppStoreBackfillCheckpoint(pool: env.pool)
            let state = try #require(try await checkpoints.lease(owner: "next", now: clock.now(), duration: 600))
            #expect(state.checkpoint?.timeIntervalSince1970.rounded() == now.addingTimeInterval(7_200).timeIntervalSince1970.rounded())
            #expect(try await checkpoints.lease(owner: "other", now: clock.now(), duration: 600) == nil, "one process at a time")
            #expect(try await checkpoints.lease(owner: "other", now: clock.now().addingTimeInterval(601), duration: 600) != nil, "an expired lease is free")
        }
    }

    @Test("a run that fails half-way (the store answers 500, a forged notification) keeps the checkpoint; forged notifications change nothing")
    func failedRunKeepsCheckpoint() async throws {
        try await TestEnvironment.withFresh { env in
            let trust = try StoreKitTrust()
            let forger = try StoreKitTrust()
            let double = try await AppStoreDouble(bundleID: StoreKitTrust.bundleID)
            let now = Date()
            let clock = ManualClock(start: now)
            let forged = try forger.notification("REFUND", transaction: StoreKitTrust.transaction(
                original: "t-kept", purchased: now.addingTimeInterval(-86_400), expires: now.addingTimeInterval(29 * 86_400), signed: now,
                revoked: now), signed: now)
            let forgedPayload = try #require((try JSONSerialization.jsonObject(with: forged) as? [String: Any])?["signedPayload"] as? String)
            try await double.script("POST", "/inApps/v1/notifications/history", query: [:], [
                AppStoreDouble.Answer(json: ["hasMore": true, "paginationToken": "p2", "notificationHistory": [["signedPayload": .string(forgedPayload)]]]),
            ])
            try await double.script("POST", "/inApps/v1/notifications/history", query: ["paginationToken": "p2"], [
                AppStoreDouble.Answer(status: 500, json: AppStoreDouble.error(5000000, "An unknown error occurred.")),
            ])
            let api = try AppStoreDouble.client(double, attempts: 1)
            let backfill = NotificationBackfill(
                api: api, notifications: Self.notifications(env, verifier: trust.verifier),
                checkpoints: AppStoreBackfillCheckpoint(pool: env.pool), interval: .seconds(3_600), clock: clock, logger: env.logger)
            let outcome = await backfill.runOnce()
            #expect(outcome.leased)
            // Both windows of the first run fail on their second page (the store answers the same
            // for each): the second failure ends the run.
            #expect(outcome.pages == 2)
            #expect(outcome.refused == 2)
            #expect(outcome.failed == 2)
            #expect(!outcome.completed)
            #expect(try await env.scalar("SELECT count(*) FROM store_backfill WHERE checkpoint IS NULL AND last_error LIKE '%500%'") == 1)
            #expect(try await env.scalar("SELECT count(*) FROM store_notifications") == 0)
        }
    }

    @Test("a notification in the production API's history that is of the sandbox (and its transaction too) is refused and changes nothing, though the verifier accepts both")
    func notificationOfAnotherEnvironmentIsRefused() async throws {
        try await TestEnvironment.withFresh { env in
            let trust = try StoreKitTrust()
            // A staging server: both environments accepted, so that only the API's environment refuses.
            let both = try StoreKitVerifier(
                rootCertificates: [trust.authority.root], bundleID: StoreKitTrust.bundleID, allowedEnvironments: [.production, .sandbox])
            let double = try await AppStoreDouble(bundleID: StoreKitTrust.bundleID)
            let now = Date()
            let clock = ManualClock(start: now)
            let purchased = now.addingTimeInterval(-86_400)
            let expires = now.addingTimeInterval(29 * 86_400)
            let first = StoreKitTrust.transaction(original: "t-sbx", purchased: purchased, expires: expires, signed: purchased)
            try await StoreKitTrust.deviceReported(first, account: "sandboxed", trust: trust, env: env)
            let body = try trust.notification("REFUND", transaction: StoreKitTrust.transaction(
                original: "t-sbx", purchased: purchased, expires: expires, signed: now.addingTimeInterval(-60),
                revoked: now.addingTimeInterval(-120), environment: "Sandbox"), signed: now.addingTimeInterval(-60), environment: "Sandbox")
            let signedPayload = try #require((try JSONSerialization.jsonObject(with: body) as? [String: Any])?["signedPayload"] as? String)
            try await double.script("POST", "/inApps/v1/notifications/history", [
                AppStoreDouble.Answer(json: ["hasMore": false, "notificationHistory": [["signedPayload": .string(signedPayload)]]]),
            ])
            let backfill = NotificationBackfill(
                api: try AppStoreDouble.client(double, attempts: 1), notifications: Self.notifications(env, verifier: both),
                checkpoints: AppStoreBackfillCheckpoint(pool: env.pool), interval: .seconds(3_600), clock: clock, logger: env.logger)
            let outcome = await backfill.runOnce()
            #expect(outcome.completed)
            #expect(outcome.refused == 2 && outcome.applied == 0, "\(outcome)")
            #expect(try await env.scalar("SELECT count(*) FROM store_notifications") == 0)
            #expect(try await env.scalar("SELECT count(*) FROM reports WHERE account_id = 'sandboxed' AND source = 'store'") == 0)
        }
    }

    @Test("a store whose paginationTokens go round in a circle (A, B, A, B, ...) is refused at the first token seen again, after a few pages")
    func cyclingTokensAreRefused() async throws {
        try await TestEnvironment.withFresh { env in
            let trust = try StoreKitTrust()
            let double = try await AppStoreDouble(bundleID: StoreKitTrust.bundleID)
            let clock = ManualClock()
            let empty: JSONValue = []
            try await double.script("POST", "/inApps/v1/notifications/history", query: [:], [
                AppStoreDouble.Answer(json: ["hasMore": true, "paginationToken": "A", "notificationHistory": empty]),
            ])
            try await double.script("POST", "/inApps/v1/notifications/history", query: ["paginationToken": "A"], [
                AppStoreDouble.Answer(json: ["hasMore": true, "paginationToken": "B", "notificationHistory": empty]),
            ])
            try await double.script("POST", "/inApps/v1/notifications/history", query: ["paginationToken": "B"], [
                AppStoreDouble.Answer(json: ["hasMore": true, "paginationToken": "A", "notificationHistory": empty]),
            ])
            // A bound of 50 pages a window keeps the test short; the store gets nowhere near it.
            let backfill = NotificationBackfill(
                api: try AppStoreDouble.client(double, attempts: 1), notifications: Self.notifications(env, verifier: trust.verifier),
                checkpoints: AppStoreBackfillCheckpoint(pool: env.pool), interval: .seconds(3_600), clock: clock, logger: env.logger,
                maximumPages: 50)
            let outcome = await backfill.runOnce()
            #expect(outcome.leased && !outcome.completed)
            // The first run has two windows (a day back, then the overlap to now): the first, the A
            // and the B page of each, and no more.
            let asked = try await double.requests()
            #expect(asked.count == 6, "\(asked.map(\.query))")
            #expect(asked.map { $0.query["paginationToken"] ?? "-" } == ["-", "A", "B", "-", "A", "B"])
            #expect(outcome.failed == 2)
            #expect(try await env.scalar("SELECT count(*) FROM store_backfill WHERE checkpoint IS NULL AND last_error LIKE '%paginationToken%'") == 1)
        }
    }

    @Test("a window that always fails holds the checkpoint, not the windows after it: they are read (a refund in them applied) at once, and after three such runs the window is skipped, said and recorded")
    func failingWindowDoesNotHoldLaterOnes() async throws {
        try await TestEnvironment.withFresh { env in
            let trust = try StoreKitTrust()
            let double = try await AppStoreDouble(bundleID: StoreKitTrust.bundleID)
            let now = Date()
            let clock = ManualClock(start: now)
            let purchased = now.addingTimeInterval(-86_400)
            let expires = now.addingTimeInterval(29 * 86_400)
            let first = StoreKitTrust.transaction(original: "t-stuck", purchased: purchased, expires: expires, signed: purchased)
            try await StoreKitTrust.deviceReported(first, account: "stuck", trust: trust, env: env)
            // A refund in the last window (the last ten minutes), whose notification was lost.
            let body = try trust.notification("REFUND", transaction: StoreKitTrust.transaction(
                original: "t-stuck", purchased: purchased, expires: expires, signed: now.addingTimeInterval(-60),
                revoked: now.addingTimeInterval(-120)), signed: now.addingTimeInterval(-60))
            let signedPayload = try #require((try JSONSerialization.jsonObject(with: body) as? [String: Any])?["signedPayload"] as? String)
            // Every run asks the first window (a day back) and then the last: the first always fails.
            let failing = AppStoreDouble.Answer(status: 500, json: AppStoreDouble.error(5000000, "An unknown error occurred."))
            let refund = AppStoreDouble.Answer(json: ["hasMore": false, "notificationHistory": [["signedPayload": .string(signedPayload)]]])
            try await double.script("POST", "/inApps/v1/notifications/history", [failing, refund, failing, refund, failing, refund])
            let backfill = NotificationBackfill(
                api: try AppStoreDouble.client(double, attempts: 1), notifications: Self.notifications(env, verifier: trust.verifier),
                checkpoints: AppStoreBackfillCheckpoint(pool: env.pool), interval: .seconds(3_600), clock: clock, logger: env.logger)

            // The first run: the refund is applied although the window before it failed.
            var outcome = await backfill.runOnce()
            #expect(outcome.failed == 1 && outcome.applied == 1 && outcome.skipped == 0 && !outcome.completed)
            #expect(try await env.scalar("SELECT count(*) FROM reports WHERE account_id = 'stuck' AND source = 'store' AND revoked_at IS NOT NULL") == 1)
            #expect(try await env.scalar("SELECT count(*) FROM store_backfill WHERE checkpoint IS NULL AND last_error LIKE 'window [%500%'") == 1)
            // The second: the same (the refund a duplicate now).
            outcome = await backfill.runOnce()
            #expect(outcome.failed == 1 && outcome.applied == 0 && outcome.skipped == 0)
            #expect(try await env.scalar("SELECT count(*) FROM store_backfill WHERE checkpoint IS NULL") == 1)
            // The third: given up on, said in last_error, and the checkpoint moves past it to now.
            outcome = await backfill.runOnce()
            #expect(outcome.failed == 1 && outcome.skipped == 1)
            let checkpoint = try await env.pool.query("SELECT checkpoint, last_error FROM store_backfill")[0]
            #expect(try checkpoint.decode(Date?.self, at: 0).map { abs($0.timeIntervalSince(now)) < 0.001 } == true)
            #expect(try checkpoint.decode(String?.self, at: 1)?.hasPrefix("skipped window [") == true)
            // The next run starts from there: the skipped window is not asked again.
            let before = try await double.requests().count
            clock.advance(by: .seconds(3_600))
            outcome = await backfill.runOnce()
            #expect(outcome.completed)
            let next = try await double.requests().dropFirst(before)
            #expect(next.count == 1)
            let window = try #require(try JSONSerialization.jsonObject(with: Data((next.first?.body ?? "").utf8)) as? [String: Int64])
            #expect(window["startDate"] == AppStoreServerAPI.milliseconds(now.addingTimeInterval(-600)))
        }
    }
}
