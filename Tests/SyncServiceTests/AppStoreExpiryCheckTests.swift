import Foundation
import HummingbirdTesting
import Postgres
import SyncCore
@testable import SyncService
import SyncStore
import TestSupport
import Testing

/// Asking the App Store before an expiry (docs/STORE.md "Before an expiry"): the
/// application's own sweeper and workers (`.live`, a test clock) against the store double.
@Suite("Asking the store before an expiry", .serialized)
struct AppStoreExpiryCheckTests {
    static let day: TimeInterval = 86_400

    /// Syncs a verified premium subscription of `account` ending at `expires` and waits until it
    /// is resolved active.
    static func subscribe(
        _ client: some TestClientProtocol, trust: StoreKitTrust, account: String, original: String, purchased: Date, expires: Date, now: Date
    ) async throws {
        let jws = try trust.authority.sign(StoreKitTrust.transaction(original: original, purchased: purchased, expires: expires, signed: now))
        let (status, json) = try await client.sync(account: account, body: try StoreKitTrust.signedBody(reportID: "\(account)-p", jws: jws))
        #expect(status == .accepted, "\(json)")
        #expect(trust.entitlementStatus(try await trust.settled(client, account)) == "active")
    }

    static func events(_ env: TestEnvironment, _ account: String, _ type: String) async throws -> Int {
        try await env.scalar("SELECT count(*) FROM events WHERE account_id = '\(account)' AND type = '\(type)'")
    }

    @Test("a renewal whose notification was lost and that no device reported: at the old expiry the account stays premium, the new expiry comes from the store, one entitlement.renewed, one question")
    func missedRenewal() async throws {
        try await TestEnvironment.withFresh { env in
            let trust = try StoreKitTrust()
            let double = try await AppStoreDouble(bundleID: StoreKitTrust.bundleID)
            let now = Date()
            let clock = ManualClock(start: now)
            let expires = now.addingTimeInterval(60)
            let renewed = StoreKitTrust.transaction(
                original: "t-e1", id: "t-e2", purchased: now.addingTimeInterval(50), expires: expires.addingTimeInterval(30 * Self.day),
                signed: now.addingTimeInterval(50))
            try await double.script("GET", "/inApps/v1/subscriptions/t-e1", [AppStoreDouble.Answer(json: [
                "data": [["lastTransactions": [[
                    "status": 1, "originalTransactionId": "t-e1", "signedTransactionInfo": .string(try trust.authority.sign(renewed)),
                    "signedRenewalInfo": .string(
                        try trust.renewalInfo(original: "t-e1", autoRenew: true, billingRetry: false, grace: nil, signed: now.addingTimeInterval(50))),
                ]]]],
            ])])
            let api = try AppStoreDouble.client(double)
            let app = try env.application(workers: 1, requireSigned: true, verifier: trust.verifier, clock: clock, appStoreAPI: api)
            try await app.testLive { client in
                try await Self.subscribe(
                    client, trust: trust, account: "renewing", original: "t-e1", purchased: expires.addingTimeInterval(-30 * Self.day),
                    expires: expires, now: now)

                // Past the old expiry: the sweeper asks first, and the renewal comes from the store.
                // Just short of it, then in `advancing`'s steps across it: a jump over a due time
                // can land inside a pass that fixed its deadline before the jump, which then finds
                // its 20 s gone and counts a question it never sent.
                clock.advance(by: .seconds(59))
                #expect(try await clock.advancing {
                    let stored = try await env.scalar("SELECT count(*) FROM transactions WHERE account_id = 'renewing' AND transaction_id = 't-e2'")
                    let moved = try await env.scalar(
                        "SELECT count(*) FROM account_states WHERE account_id = 'renewing' AND next_transition_at > now() + interval '20 days'")
                    return stored == 1 && moved == 1
                })
                let account = try await trust.settled(client, "renewing")
                #expect(account["tier"] as? String == "premium")
                #expect(trust.entitlementStatus(account) == "active")
                // Another pass (as any sweep of any process runs it): nothing left to ask.
                clock.advance(by: .seconds(5))
                let check = AppStoreExpiryCheck(
                    api: api, verifier: trust.verifier,
                    binder: TransactionBinder(pool: env.pool, engine: ResolutionEngine(pool: env.pool, catalogue: .default), policy: .reject),
                    catalogue: .default, clock: clock, logger: env.logger)
                #expect(await check.askDue().asked == 0)
                #expect(try await double.requests().filter { $0.path == "/inApps/v1/subscriptions/t-e1" }.count == 1)
            }
            #expect(try await Self.events(env, "renewing", "entitlement.expired") == 0)
            #expect(try await Self.events(env, "renewing", "entitlement.renewed") == 1)
            #expect(try await env.scalar("SELECT count(*) FROM store_expiry_checks WHERE account_id = 'renewing' AND outcome = 'renewed'") == 1)
            #expect(try await env.scalar("SELECT count(*) FROM reports WHERE account_id = 'renewing' AND source = 'store'") == 1)
        }
    }

    @Test("a store that cannot be asked holds an expiry, asking again at most once a minute, for 15 minutes at most; then the expiry is applied, once")
    func storeDown() async throws {
        try await TestEnvironment.withFresh { env in
            let trust = try StoreKitTrust()
            let double = try await AppStoreDouble(bundleID: StoreKitTrust.bundleID)
            let now = Date()
            let clock = ManualClock(start: now)
            let expires = now.addingTimeInterval(60)
            try await double.script("GET", "/inApps/v1/subscriptions/t-d1", [AppStoreDouble.Answer(status: 500, json: AppStoreDouble.error(5000000, "An unknown error occurred."))])
            let api = try AppStoreDouble.client(double, attempts: 1)
            let app = try env.application(workers: 1, requireSigned: true, verifier: trust.verifier, clock: clock, appStoreAPI: api)
            try await app.testLive { client in
                try await Self.subscribe(
                    client, trust: trust, account: "waiting", original: "t-d1", purchased: expires.addingTimeInterval(-30 * Self.day),
                    expires: expires, now: now)
                // Past the expiry, the store down: held (still active), asked again a minute later.
                // Each jump stops short of the due time, and `advancing`'s steps cross it (see
                // the test above).
                clock.advance(by: .seconds(59))
                #expect(try await clock.advancing { try await env.scalar("SELECT count(*) FROM store_expiry_checks WHERE outcome = 'failed'") == 1 })
                clock.advance(by: .seconds(55))
                #expect(try await clock.advancing { try await env.scalar("SELECT count(*) FROM store_expiry_checks WHERE attempts = 2") == 1 })
                // The first pass held the expiry (had it not, it would have been applied before the
                // second question).
                #expect(try await env.scalar("SELECT count(*) FROM entitlements WHERE account_id = 'waiting' AND status = 'active'") == 1)
                #expect(try await Self.events(env, "waiting", "entitlement.expired") == 0)

                // Past the bound: the expiry is applied without another question.
                clock.advance(by: .seconds(15 * 60))
                #expect(try await clock.advancing { try await Self.events(env, "waiting", "entitlement.expired") == 1 })
                #expect(try await double.requests().filter { $0.path == "/inApps/v1/subscriptions/t-d1" }.count == 2)
            }
            #expect(try await env.scalar("SELECT count(*) FROM entitlements WHERE account_id = 'waiting' AND status = 'active'") == 0)
        }
    }

    static func expired(_ env: TestEnvironment, _ account: String) async throws -> Bool {
        try await events(env, account, "entitlement.expired") == 1
    }

    @Test("the store's answer ends the hold it answers: a subscription the store says expired, and one it does not know, lose access within seconds of the answer, not a minute later")
    func answerEndsTheHold() async throws {
        try await TestEnvironment.withFresh { env in
            let trust = try StoreKitTrust()
            let double = try await AppStoreDouble(bundleID: StoreKitTrust.bundleID)
            let now = Date()
            let clock = ManualClock(start: now)
            let expires = now.addingTimeInterval(60)
            let purchased = expires.addingTimeInterval(-30 * Self.day)
            // The store's statuses for t-h1: expired, its last transaction the one the device sent.
            let last = try trust.authority.sign(StoreKitTrust.transaction(original: "t-h1", purchased: purchased, expires: expires, signed: now))
            try await double.script("GET", "/inApps/v1/subscriptions/t-h1", [AppStoreDouble.Answer(json: [
                "data": [["lastTransactions": [["status": 2, "originalTransactionId": "t-h1", "signedTransactionInfo": .string(last)]]]],
            ])])
            // t-h2 is not scripted: the double answers "transaction id not found".
            let api = try AppStoreDouble.client(double)
            let app = try env.application(workers: 1, requireSigned: true, verifier: trust.verifier, clock: clock, appStoreAPI: api)
            try await app.testLive { client in
                for (account, original) in [("lapsed", "t-h1"), ("stranger", "t-h2")] {
                    try await Self.subscribe(client, trust: trust, account: account, original: original, purchased: purchased, expires: expires, now: now)
                }
                // Three seconds before the end, a sweep holds both: their questions cannot be asked yet.
                clock.advance(by: .seconds(57))
                let heldPast = RFC3339.format(expires.addingTimeInterval(30))
                // The clock moves on only while it is short of the end: on a starved core the
                // sweep that holds them may come late, and a clock stepped past the end would let
                // the questions be asked and answered before the hold was ever seen.
                let shortOfTheEnd = expires.addingTimeInterval(-0.5)
                #expect(try await waitUntil(seconds: 300) {
                    if try await env.scalar(
                        "SELECT count(*) FROM account_states WHERE account_id IN ('lapsed', 'stranger') AND next_transition_at > '\(heldPast)'") == 2 {
                        return true
                    }
                    if clock.now() < shortOfTheEnd { clock.advance(by: .milliseconds(1)) }
                    return false
                })
                // Past the end, both are asked and answered at once, and the next sweep applies
                // both expiries: seconds of the clock, not the minute the hold would last.
                clock.advance(by: .seconds(4))
                let answered = clock.now()
                #expect(try await clock.advancing(by: .milliseconds(1)) {
                    let lapsed = try await Self.expired(env, "lapsed")
                    let stranger = try await Self.expired(env, "stranger")
                    return lapsed && stranger
                })
                #expect(clock.now().timeIntervalSince(answered) < 30, "applied \(clock.now().timeIntervalSince(answered)) s after the answers")
            }
            let questions = try await env.pool.query(
                "SELECT original_transaction_id, outcome, attempts FROM store_expiry_checks ORDER BY 1"
            ).map { "\(try $0.decode(String.self, at: 0)) \(try $0.decode(String.self, at: 1)) \(try $0.decode(Int.self, at: 2))" }
            #expect(questions == ["t-h1 unchanged 1", "t-h2 unchanged 1"])
            let asked = try await double.requests().map(\.path)
            #expect(asked.filter { $0.hasSuffix("/t-h1") }.count == 1 && asked.filter { $0.hasSuffix("/t-h2") }.count == 1)
        }
    }

    @Test("one slow answer holds nothing else: while the store sits on one subscription, a pass ending meanwhile is expired by the sweep, and the pass's deadline cancels the slow question so the next subscription is asked and expired; the slow one stays held, asked again later")
    func slowAnswerHoldsNothingElse() async throws {
        try await TestEnvironment.withFresh { env in
            let trust = try StoreKitTrust()
            let double = try await AppStoreDouble(bundleID: StoreKitTrust.bundleID)
            // A premium pass (three months from its purchase: no store question) ends when the
            // slow subscription does; the quick one a second later.
            let passPurchased = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 - 91 * Self.day).rounded(.down))
            let ends = try #require(ISODuration("P3M")).advance(passPurchased)
            let now = Date(timeIntervalSince1970: (ends.timeIntervalSince1970 - 60).rounded(.down))
            let clock = ManualClock(start: now)
            // The store sits on t-s1 far longer than the test waits for anything.
            try await double.script("GET", "/inApps/v1/subscriptions/t-s1", [AppStoreDouble.Answer(
                status: 404, json: AppStoreDouble.error(4040010, "Transaction id not found."), delay: 600)])
            let api = try AppStoreDouble.client(double)
            let app = try env.application(workers: 1, requireSigned: true, verifier: trust.verifier, clock: clock, appStoreAPI: api)
            try await app.testLive { client in
                let purchased = ends.addingTimeInterval(-30 * Self.day)
                try await Self.subscribe(client, trust: trust, account: "slow", original: "t-s1", purchased: purchased, expires: ends, now: now)
                try await Self.subscribe(
                    client, trust: trust, account: "quick", original: "t-q1", purchased: purchased, expires: ends.addingTimeInterval(1), now: now)
                let pass = try trust.authority.sign(StoreKitTrust.transaction(
                    original: "t-p1", product: "voip.premium.pass.3m", purchased: passPurchased, expires: nil, signed: now))
                #expect(try await client.sync(account: "pass", body: try StoreKitTrust.signedBody(reportID: "pass-p", jws: pass)).status == .accepted)
                #expect(trust.entitlementStatus(try await trust.settled(client, "pass")) == "active")

                // Past all three ends. The first question (the oldest end) is t-s1's.
                clock.advance(by: .seconds(62))
                #expect(try await clock.advancing(by: .milliseconds(1)) {
                    try await double.requests().contains { $0.path.hasSuffix("/t-s1") }
                })
                // While it is in flight, the sweep applies what needs no question.
                #expect(try await clock.advancing(by: .milliseconds(1)) { try await Self.expired(env, "pass") })
                #expect(try await env.scalar("SELECT count(*) FROM store_expiry_checks WHERE outcome = 'asking'") == 1)

                // The pass's deadline cancels the question; the next pass asks t-q1 and its
                // expiry is applied.
                clock.advance(by: AppStoreExpiryCheck.passDuration)
                #expect(try await clock.advancing(by: .milliseconds(1)) { try await Self.expired(env, "quick") })
                #expect(try await env.scalar(
                    "SELECT count(*) FROM store_expiry_checks WHERE account_id = 'slow' AND outcome = 'failed'") == 1)
                #expect(try await !Self.expired(env, "slow"), "held: its question has no answer")
            }
        }
    }
}
