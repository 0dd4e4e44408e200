import Foundation
import HummingbirdTesting
import Postgres
import SyncCore
@testable import SyncService
import SyncStore
import TestSupport
import Testing
import X509

/// `subsync reconcile --against-store` (docs/STORE.md): the built binary against a
/// real database and the store double.
@Suite("Reconcile against the store", .serialized)
struct AppStoreReconcileCommandTests {
    typealias Command = SubsyncCommand

    /// A monthly premium subscription `original` whose first period ended ten days before `now`
    /// and its renewal `renewalID`, running twenty days on: what the store has and a device
    /// reported only the first of.
    static func renewedSubscription(original: String, renewalID: String, now: Date) -> (first: JWSTransactionPayload, renewal: JWSTransactionPayload) {
        let day: TimeInterval = 86_400
        let first = StoreKitTrust.transaction(
            original: original, purchased: now.addingTimeInterval(-40 * day), expires: now.addingTimeInterval(-10 * day),
            signed: now.addingTimeInterval(-40 * day))
        let renewal = StoreKitTrust.transaction(
            original: original, id: renewalID, purchased: now.addingTimeInterval(-10 * day), expires: now.addingTimeInterval(20 * day),
            signed: now.addingTimeInterval(-10 * day))
        return (first, renewal)
    }

    @Test("a renewal no device or notification reported: --dry-run finds it, the repair ingests it as a store report, the next run finds none; forged and other accounts' transactions change nothing")
    func missedRenewal() async throws {
        try await TestEnvironment.withFresh { env in
            let trust = try StoreKitTrust()
            let forger = try StoreKitTrust()
            let double = try await AppStoreDouble(bundleID: StoreKitTrust.bundleID)
            let now = Date()
            let day: TimeInterval = 86_400
            let (first, renewal) = Self.renewedSubscription(original: "t-r1", renewalID: "t-r2", now: now)
            // What the account has: the first period only, verified and bound (a device's sync).
            let stored = try trust.authority.sign(first)
            let report = try await trust.verifier.verifyTransaction(stored).report(reportID: "d1", deviceID: "phone", observedAt: now.addingTimeInterval(-39 * day))
            let engine = ResolutionEngine(pool: env.pool, catalogue: .default)
            let binder = TransactionBinder(pool: env.pool, engine: engine, policy: .reject)
            _ = try await binder.submit(
                accountID: "drifted", device: DeviceInfo(id: "phone"), reports: [report],
                claims: [PurchaseClaim(originalTransactionID: "t-r1", appAccountToken: nil)])
            // Another account has only a report naming the same purchase (unsigned data, never
            // bound to it): the store's answers about it are not that account's to take.
            var claimed = report
            claimed.reportID = "c1"
            _ = try await ReportInbox(pool: env.pool).submit(accountID: "claimer", device: DeviceInfo(id: "tablet"), reports: [claimed])
            #expect(try await engine.resolvePendingBatch(limit: 10).reportsResolved == 2)
            #expect(try await env.scalar("SELECT count(*) FROM entitlements WHERE account_id = 'drifted' AND status = 'active'") == 0)

            // What the store has: both periods, a purchase of another Apple ID account's subsync
            // account (same customer, not this account's), and a forged "renewal" to 2099.
            let other = StoreKitTrust.transaction(
                original: "t-elsewhere", purchased: now.addingTimeInterval(-5 * day), expires: now.addingTimeInterval(25 * day), signed: now)
            let forged = StoreKitTrust.transaction(
                original: "t-r1", id: "t-r3", purchased: now.addingTimeInterval(-day), expires: now.addingTimeInterval(20 * 365 * day), signed: now)
            try await double.script("GET", "/inApps/v2/history/t-r1", [AppStoreDouble.Answer(json: [
                "hasMore": false, "revision": "x",
                "signedTransactions": [.string(stored), .string(try trust.authority.sign(renewal)), .string(try trust.authority.sign(other)),
                                       .string(try forger.authority.sign(forged))],
            ])])
            let signedRenewal = try trust.renewalInfo(original: "t-r1", autoRenew: true, billingRetry: false, grace: nil, signed: now)
            try await double.script("GET", "/inApps/v1/subscriptions/t-r1", [AppStoreDouble.Answer(json: [
                "data": [["subscriptionGroupIdentifier": "g", "lastTransactions": [[
                    "status": 1, "originalTransactionId": "t-r1", "signedTransactionInfo": .string(try trust.authority.sign(renewal)),
                    "signedRenewalInfo": .string(signedRenewal),
                ]]]],
            ])])

            let roots = FileManager.default.temporaryDirectory.appendingPathComponent("store-reconcile-\(UUID().uuidString).pem")
            try trust.authority.root.serializeAsPEM().pemString.write(to: roots, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(at: roots) }
            let settings = [
                "SUBSYNC_APPSTORE_KEY_FILE": AppStoreDouble.keyFile.path, "SUBSYNC_APPSTORE_KEY_ID": AppStoreDouble.keyID,
                "SUBSYNC_APPSTORE_ISSUER_ID": AppStoreDouble.issuerID, "SUBSYNC_APPSTORE_BASE_URL": double.baseURL,
                "SUBSYNC_APPLE_ROOT_CERTIFICATES": roots.path, "SUBSYNC_BUNDLE_ID": StoreKitTrust.bundleID,
            ]

            var out = try await Command.run(["reconcile", "--against-store", "--account", "drifted", "--dry-run", "--json"], env: env, extra: settings)
            #expect(out.status == 2, "drift with --dry-run exits 2: \(out.stderr)")
            var differences = (out.object["differences"] as? [[String: Any]]) ?? []
            #expect(differences.map { $0["field"] as? String } == ["transactions.row"], "\(differences)")
            #expect(differences.first?["transaction_id"] as? String == "t-r2")
            #expect((out.object["summary"] as? [String: Any])?["unverified"] as? Int == 1)
            #expect(try await env.scalar("SELECT count(*) FROM reports WHERE account_id = 'drifted'") == 1, "a dry run writes nothing")
            // Without a key: a clear refusal.
            let unconfigured = try await Command.run(["reconcile", "--against-store", "--account", "drifted"], env: env)
            #expect(unconfigured.status == 64)
            #expect(unconfigured.stderr.contains("SUBSYNC_APPSTORE_KEY_FILE"))

            let claimer = try await Command.run(["reconcile", "--against-store", "--account", "claimer"], env: env, extra: settings)
            #expect(claimer.status == 0, "\(claimer.stderr)")
            #expect(claimer.stdout.contains("no drift"), "\(claimer.stdout)")
            #expect(try await env.scalar("SELECT count(*) FROM reports WHERE account_id = 'claimer' AND source = 'store'") == 0)

            out = try await Command.run(["reconcile", "--against-store", "--account", "drifted"], env: env, extra: settings)
            #expect(out.status == 0, "\(out.stderr)")
            #expect(out.stdout.contains("1 store reports submitted"), "\(out.stdout)")
            // Again before a worker resolved it: the same store report, stored already; nothing new.
            out = try await Command.run(["reconcile", "--against-store", "--account", "drifted"], env: env, extra: settings)
            #expect(out.status == 0, "\(out.stderr)")
            #expect(out.stdout.contains("0 store reports submitted, 1 already stored by an earlier run"), "\(out.stdout)")
            #expect(try await env.scalar("SELECT count(*) FROM reports WHERE account_id = 'drifted' AND source = 'store' AND transaction_id = 't-r2'") == 1)
            #expect(try await engine.resolvePendingBatch(limit: 10).reportsResolved == 1)
            #expect(try await env.scalar("SELECT count(*) FROM entitlements WHERE account_id = 'drifted' AND status = 'active'") == 1)
            #expect(try await env.scalar("SELECT count(*) FROM transactions WHERE transaction_id IN ('t-r3', 't-elsewhere')") == 0)

            out = try await Command.run(["reconcile", "--against-store", "--all", "--dry-run", "--json", "--no-progress"], env: env, extra: settings)
            #expect(out.status == 0, "\(out.stdout) \(out.stderr)")
            differences = (out.object["differences"] as? [[String: Any]]) ?? []
            #expect(differences.isEmpty, "\(differences)")
            #expect((out.object["summary"] as? [String: Any])?["accounts_checked"] as? Int == 2)
            // Every request carried a token the double verified.
            #expect(try await double.requests().allSatisfy(\.jwt.valid))
        }
    }

    /// The settings that point `subsync` at the store double, with `trust`'s root as the trusted one.
    static func storeSettings(_ double: AppStoreDouble, trust: StoreKitTrust, roots: URL) throws -> [String: String] {
        try trust.authority.root.serializeAsPEM().pemString.write(to: roots, atomically: true, encoding: .utf8)
        return [
            "SUBSYNC_APPSTORE_KEY_FILE": AppStoreDouble.keyFile.path, "SUBSYNC_APPSTORE_KEY_ID": AppStoreDouble.keyID,
            "SUBSYNC_APPSTORE_ISSUER_ID": AppStoreDouble.issuerID, "SUBSYNC_APPSTORE_BASE_URL": double.baseURL,
            "SUBSYNC_APPLE_ROOT_CERTIFICATES": roots.path, "SUBSYNC_BUNDLE_ID": StoreKitTrust.bundleID,
        ]
    }

    @Test("an operator's revoke is not drift against the store: --repair writes what the store says (signed after the revoke) and the transaction stays revoked until the operator's unrevoke")
    func operatorRevokeSurvivesRepair() async throws {
        try await TestEnvironment.withFresh { env in
            let trust = try StoreKitTrust()
            let double = try await AppStoreDouble(bundleID: StoreKitTrust.bundleID)
            let now = Date()
            let day: TimeInterval = 86_400
            let purchase = StoreKitTrust.transaction(
                original: "t-f1", purchased: now.addingTimeInterval(-5 * day), expires: now.addingTimeInterval(25 * day),
                signed: now.addingTimeInterval(-5 * day))
            let report = try await trust.verifier.verifyTransaction(try trust.authority.sign(purchase))
                .report(reportID: "d1", deviceID: "phone", observedAt: now.addingTimeInterval(-5 * day))
            let engine = ResolutionEngine(pool: env.pool, catalogue: .default)
            _ = try await TransactionBinder(pool: env.pool, engine: engine, policy: .reject).submit(
                accountID: "fraud", device: DeviceInfo(id: "phone"), reports: [report],
                claims: [PurchaseClaim(originalTransactionID: "t-f1", appAccountToken: nil)])
            #expect(try await engine.resolvePendingBatch(limit: 10).reportsResolved == 1)
            let admin = AdminOverride(pool: env.pool, catalogue: .default)
            let revoked = try await admin.apply(.revoke, transactionID: "t-f1", accountID: "fraud", actor: "ops", reason: "fraud")
            #expect(revoked.revoked)
            let status = "SELECT count(*) FROM entitlements WHERE account_id = 'fraud' AND status = "
            #expect(try await env.scalar(status + "'revoked'") == 1)

            // The store, asked after the revoke, signs the transaction afresh (no refund) and its
            // renewal info says auto-renew is on, which the device never said: a difference.
            let later = Date().addingTimeInterval(1)
            var resigned = purchase
            resigned.signedDate = later
            let signed = try trust.authority.sign(resigned)
            try await double.script("GET", "/inApps/v2/history/t-f1", [AppStoreDouble.Answer(json: [
                "hasMore": false, "revision": "x", "signedTransactions": [.string(signed)],
            ])])
            let renewal = try trust.renewalInfo(original: "t-f1", autoRenew: true, billingRetry: false, grace: nil, signed: later)
            try await double.script("GET", "/inApps/v1/subscriptions/t-f1", [AppStoreDouble.Answer(json: [
                "data": [["subscriptionGroupIdentifier": "g", "lastTransactions": [[
                    "status": 1, "originalTransactionId": "t-f1", "signedTransactionInfo": .string(signed), "signedRenewalInfo": .string(renewal),
                ]]]],
            ])])
            let roots = FileManager.default.temporaryDirectory.appendingPathComponent("store-reconcile-\(UUID().uuidString).pem")
            defer { try? FileManager.default.removeItem(at: roots) }
            let settings = try Self.storeSettings(double, trust: trust, roots: roots)

            let dry = try await Command.run(["reconcile", "--against-store", "--account", "fraud", "--dry-run", "--json"], env: env, extra: settings)
            let fields = ((dry.object["differences"] as? [[String: Any]]) ?? []).compactMap { $0["field"] as? String }
            #expect(fields.contains("transactions.will_auto_renew"), "\(dry.stdout) \(dry.stderr)")
            #expect(!fields.contains("transactions.revoked_at"), "the operator's revoke is not the store's to repair: \(fields)")

            let repair = try await Command.run(["reconcile", "--against-store", "--account", "fraud"], env: env, extra: settings)
            #expect(repair.status == 0, "\(repair.stderr)")
            #expect(repair.stdout.contains("1 store reports submitted"), "\(repair.stdout)")
            #expect(try await engine.resolvePendingBatch(limit: 10).reportsResolved == 1)
            #expect(try await env.scalar(status + "'revoked'") == 1, "the store's later signature lifted the operator's revoke")

            let lifted = try await admin.apply(.unrevoke, transactionID: "t-f1", accountID: "fraud", actor: "ops", reason: "cleared")
            #expect(lifted.recorded && !lifted.revoked)
            #expect(try await env.scalar(status + "'active'") == 1)
        }
    }

    @Test("a repair whose store report id another report holds (a device's, stored before such ids were refused) is said: not repaired, exit 65")
    func preTakenReportID() async throws {
        try await TestEnvironment.withFresh { env in
            let trust = try StoreKitTrust()
            let double = try await AppStoreDouble(bundleID: StoreKitTrust.bundleID)
            let now = Date()
            let day: TimeInterval = 86_400
            let purchase = StoreKitTrust.transaction(
                original: "t-p1", purchased: now.addingTimeInterval(-5 * day), expires: now.addingTimeInterval(25 * day),
                signed: now.addingTimeInterval(-5 * day))
            let engine = ResolutionEngine(pool: env.pool, catalogue: .default)
            let binder = TransactionBinder(pool: env.pool, engine: engine, policy: .reject)
            let bought = try await trust.verifier.verifyTransaction(try trust.authority.sign(purchase))
                .report(reportID: "d1", deviceID: "phone", observedAt: now.addingTimeInterval(-5 * day))
            _ = try await binder.submit(
                accountID: "victim", device: DeviceInfo(id: "phone"), reports: [bought],
                claims: [PurchaseClaim(originalTransactionID: "t-p1", appAccountToken: nil)])

            // The refund the store has and subsync missed, and the id its store report takes.
            var refunded = purchase
            refunded.signedDate = now
            refunded.revocationDate = now.addingTimeInterval(-3_600)
            refunded.revocationReason = 0
            let refund = try trust.authority.sign(refunded)
            let answers = AppStoreAnswers(api: try AppStoreDouble.client(double), verifier: trust.verifier, binder: binder)
            let storeID = try #require(try await answers.report(transaction: refund, renewal: nil, originals: ["t-p1"])?.reportID)
            // A device synced a spare pre-refund copy under that id (every fact of its name is the
            // device's to know), before the service refused such ids.
            var spare = purchase
            spare.signedDate = now.addingTimeInterval(-4 * day)
            let squatted = try await trust.verifier.verifyTransaction(try trust.authority.sign(spare))
                .report(reportID: storeID, deviceID: "phone", observedAt: now.addingTimeInterval(-4 * day))
            #expect(try await ReportInbox(pool: env.pool).submit(accountID: "victim", device: DeviceInfo(id: "phone"), reports: [squatted]).accepted == [storeID])
            #expect(try await engine.resolvePendingBatch(limit: 10).reportsResolved == 2)

            try await double.script("GET", "/inApps/v2/history/t-p1", [AppStoreDouble.Answer(json: [
                "hasMore": false, "revision": "x", "signedTransactions": [.string(refund)],
            ])])
            let roots = FileManager.default.temporaryDirectory.appendingPathComponent("store-reconcile-\(UUID().uuidString).pem")
            defer { try? FileManager.default.removeItem(at: roots) }
            let settings = try Self.storeSettings(double, trust: trust, roots: roots)

            let out = try await Command.run(["reconcile", "--against-store", "--account", "victim"], env: env, extra: settings)
            #expect(out.status == 65, "a repair that wrote nothing is not a success: \(out.stdout) \(out.stderr)")
            #expect(out.stderr.contains("victim: not repaired: store report \(storeID) was not written"), "\(out.stderr)")
            #expect(out.stdout.contains("1 differences in 1 accounts found, 0 store reports submitted, 1 NOT written"), "\(out.stdout)")
            #expect(!out.stdout.contains("repaired"), "\(out.stdout)")
            let json = try await Command.run(["reconcile", "--against-store", "--account", "victim", "--json"], env: env, extra: settings)
            #expect(json.status == 65)
            let summary = json.object["summary"] as? [String: Any]
            #expect(summary?["store_reports_submitted"] as? Int == 0, "\(json.stdout)")
            #expect(summary?["store_report_ids_taken"] as? Int == 1, "\(json.stdout)")
            #expect(summary?["accounts_repaired"] as? Int == 0, "\(json.stdout)")
            // What is stored says so too: the refund was not applied.
            #expect(try await env.scalar("SELECT count(*) FROM reports WHERE account_id = 'victim' AND source = 'store'") == 0)
            #expect(try await env.scalar("SELECT count(*) FROM entitlements WHERE account_id = 'victim' AND status = 'active'") == 1)
        }
    }

    @Test("the console's action: POST /v1/admin/accounts/{id}/reconcile-store checks (dry run by default) and repairs, audited; admin only; 404 without the API")
    func adminRoute() async throws {
        try await TestEnvironment.withFresh { env in
            let trust = try StoreKitTrust()
            let double = try await AppStoreDouble(bundleID: StoreKitTrust.bundleID)
            let now = Date()
            let (first, renewal) = Self.renewedSubscription(original: "t-a1", renewalID: "t-a2", now: now)
            try await double.script("GET", "/inApps/v2/history/t-a1", [AppStoreDouble.Answer(json: [
                "hasMore": false, "signedTransactions": [.string(try trust.authority.sign(first)), .string(try trust.authority.sign(renewal))],
            ])])
            let api = try AppStoreDouble.client(double)
            try await env.application(workers: 0, requireSigned: true, verifier: trust.verifier, appStoreAPI: api).test(.router) { client in
                let (status, _) = try await client.sync(
                    account: "console", body: try StoreKitTrust.signedBody(reportID: "c-1", jws: try trust.authority.sign(first)), waitMilliseconds: nil)
                #expect(status == .accepted)
                #expect(try await ResolutionEngine(pool: env.pool, catalogue: .default).resolvePendingBatch(limit: 10).reportsResolved == 1)

                let (_, account) = try await client.getJSON("/v1/admin/accounts/console")
                #expect(account["app_store"] as? Bool == true)
                var (answerStatus, answer) = try await client.postJSON(
                    "/v1/admin/accounts/console/reconcile-store", body: Data(#"{"actor": "ops-ann"}"#.utf8))
                #expect(answerStatus == .ok, "\(answer)")
                #expect(answer["dry_run"] as? Bool == true)
                #expect((answer["differences"] as? [[String: Any]])?.map { $0["transaction_id"] as? String } == ["t-a2"])
                #expect(answer["reports_submitted"] as? Int == 0)
                #expect(try await env.scalar("SELECT count(*) FROM reports WHERE account_id = 'console' AND source = 'store'") == 0)

                (answerStatus, answer) = try await client.postJSON(
                    "/v1/admin/accounts/console/reconcile-store", body: Data(#"{"dry_run": false, "actor": "ops-ann", "reason": "ticket 12"}"#.utf8))
                #expect(answerStatus == .ok, "\(answer)")
                #expect(answer["reports_submitted"] as? Int == 1)
                #expect(try await env.scalar("SELECT count(*) FROM reports WHERE account_id = 'console' AND source = 'store' AND transaction_id = 't-a2'") == 1)
                #expect(try await env.scalar(
                    "SELECT count(*) FROM operator_actions WHERE account_id = 'console' AND action IN ('reconcile_store_dry_run', 'reconcile_store') AND actor = 'ops-ann'") == 2)

                let (refused, _) = try await client.postJSON("/v1/admin/accounts/console/reconcile-store", body: Data("{}".utf8), credential: nil)
                #expect(refused == .unauthorized)
                let (missing, _) = try await client.postJSON("/v1/admin/accounts/nobody/reconcile-store", body: Data("{}".utf8))
                #expect(missing == .notFound)
            }
            try await env.application(workers: 0).test(.router) { client in
                let (status, answer) = try await client.postJSON("/v1/admin/accounts/console/reconcile-store", body: Data("{}".utf8))
                #expect(status == .notFound)
                #expect(answer.errorCode == "not_configured")
                #expect(try await client.getJSON("/v1/admin/accounts/console").json["app_store"] as? Bool == false)
            }
        }
    }

    /// The store's history of `original` is `transactions`, signed by `trust`.
    static func history(_ double: AppStoreDouble, _ original: String, _ transactions: [JWSTransactionPayload], trust: StoreKitTrust) async throws {
        try await double.script("GET", "/inApps/v2/history/\(original)", [AppStoreDouble.Answer(json: [
            "hasMore": false, "signedTransactions": .array(try transactions.map { .string(try trust.authority.sign($0)) }),
        ])])
    }

    static func entitlementStatus(_ env: TestEnvironment, _ account: String, _ entitlement: String) async throws -> String? {
        try await env.pool.query(
            "SELECT status FROM entitlements WHERE account_id = \(account) AND entitlement_id = \(entitlement)"
        ).first?.decode(String.self, at: 0)
    }

    @Test("store answers about one transaction that differ only in isUpgraded, revocationReason or productId are named apart")
    func answerNamesCoverEveryFactTheJoinReads() async throws {
        let trust = try StoreKitTrust()
        let now = Date(timeIntervalSince1970: 1_780_000_000)
        var plain = StoreKitTrust.transaction(
            original: "t-n1", id: "t-n2", product: "voip.basic.monthly", purchased: now.addingTimeInterval(-86_400),
            expires: now.addingTimeInterval(29 * 86_400), signed: now, revoked: now.addingTimeInterval(-3_600))
        plain.revocationReason = 0
        var upgraded = plain
        upgraded.isUpgraded = true
        var reason = plain
        reason.revocationReason = 1
        var product = plain
        product.productId = "voip.premium.monthly"
        var names: [String] = []
        for payload in [plain, upgraded, reason, product] {
            // Made as AppStoreAnswers makes them: from the verified JWS, source store, signed at another
            // moment each time (the signing time is not in the name).
            var signed = payload
            signed.signedDate = now.addingTimeInterval(Double(names.count) * 60)
            let report = try await trust.verifier.verifyTransaction(try trust.authority.sign(signed))
                .report(reportID: "store", deviceID: NotificationController.deviceID, observedAt: signed.signedDate, source: .store)
            names.append("store:t-n2:" + AppStoreAnswers.factsDigest(of: report))
        }
        #expect(Set(names).count == 4, "\(names)")
        // The same facts signed later keep their name: asking again stores nothing new.
        var again = plain
        again.signedDate = now.addingTimeInterval(3_600)
        let report = try await trust.verifier.verifyTransaction(try trust.authority.sign(again))
            .report(reportID: "store", deviceID: NotificationController.deviceID, observedAt: again.signedDate, source: .store)
        #expect("store:t-n2:" + AppStoreAnswers.factsDigest(of: report) == names[0])
    }

    @Test("an upgrade the store reports after it repaired the same transaction: the upgraded-away answer is stored, not taken for the earlier one, and its entitlement ends")
    func upgradeAfterRepair() async throws {
        try await TestEnvironment.withFresh { env in
            let trust = try StoreKitTrust()
            let double = try await AppStoreDouble(bundleID: StoreKitTrust.bundleID)
            let now = Date()
            let day: TimeInterval = 86_400
            // Basic monthly: the first period a device reported, its renewal only the store knows.
            let first = StoreKitTrust.transaction(
                original: "t-u1", product: "voip.basic.monthly", purchased: now.addingTimeInterval(-40 * day),
                expires: now.addingTimeInterval(-10 * day), signed: now.addingTimeInterval(-40 * day))
            let renewal = StoreKitTrust.transaction(
                original: "t-u1", id: "t-u2", product: "voip.basic.monthly", purchased: now.addingTimeInterval(-10 * day),
                expires: now.addingTimeInterval(20 * day), signed: now.addingTimeInterval(-10 * day))
            try await StoreKitTrust.deviceReported(first, account: "upgrader", trust: trust, env: env)
            let roots = FileManager.default.temporaryDirectory.appendingPathComponent("store-upgrade-\(UUID().uuidString).pem")
            defer { try? FileManager.default.removeItem(at: roots) }
            let settings = try Self.storeSettings(double, trust: trust, roots: roots)
            let engine = ResolutionEngine(pool: env.pool, catalogue: .default)

            try await Self.history(double, "t-u1", [first, renewal], trust: trust)
            var out = try await Command.run(["reconcile", "--against-store", "--account", "upgrader"], env: env, extra: settings)
            #expect(out.status == 0, "\(out.stderr)")
            #expect(out.stdout.contains("1 store reports submitted"), "\(out.stdout)")
            _ = try await engine.resolvePendingBatch(limit: 10)
            #expect(try await Self.entitlementStatus(env, "upgrader", "basic") == "active")

            // The user upgrades to premium: the store now says the basic renewal was upgraded away
            // (signed again, every other fact as before) and has the premium transaction.
            var upgraded = renewal
            upgraded.isUpgraded = true
            upgraded.signedDate = now.addingTimeInterval(-60)
            let premium = StoreKitTrust.transaction(
                original: "t-u1", id: "t-u3", product: "voip.premium.monthly", purchased: now.addingTimeInterval(-60),
                expires: now.addingTimeInterval(30 * day), signed: now.addingTimeInterval(-60))
            try await Self.history(double, "t-u1", [first, upgraded, premium], trust: trust)
            out = try await Command.run(["reconcile", "--against-store", "--account", "upgrader", "--dry-run", "--json"], env: env, extra: settings)
            #expect(out.status == 2, "\(out.stderr)")
            let differences = ((out.object["differences"] as? [[String: Any]]) ?? []).map {
                "\($0["transaction_id"] as? String ?? "") \($0["field"] as? String ?? "")"
            }
            #expect(differences == ["t-u2 transactions.is_upgraded", "t-u3 transactions.row"], "\(differences)")
            out = try await Command.run(["reconcile", "--against-store", "--account", "upgrader"], env: env, extra: settings)
            #expect(out.status == 0, "\(out.stderr)")
            #expect(out.stdout.contains("2 store reports submitted"), "\(out.stdout)")
            _ = try await engine.resolvePendingBatch(limit: 10)
            #expect(try await env.scalar("SELECT count(*) FROM reports WHERE account_id = 'upgrader' AND transaction_id = 't-u2' AND is_upgraded") == 1)
            #expect(try await Self.entitlementStatus(env, "upgrader", "basic") == "expired", "the upgraded-away entitlement still grants")
            #expect(try await Self.entitlementStatus(env, "upgrader", "premium") == "active")
            out = try await Command.run(["reconcile", "--against-store", "--account", "upgrader", "--dry-run"], env: env, extra: settings)
            #expect(out.status == 0, "\(out.stdout)")
        }
    }

    @Test("a refund the store reverses after it repaired the same transaction before the refund: the reversal is stored and reinstates")
    func refundReversedAfterRepair() async throws {
        try await TestEnvironment.withFresh { env in
            let trust = try StoreKitTrust()
            let double = try await AppStoreDouble(bundleID: StoreKitTrust.bundleID)
            let now = Date()
            let (first, renewal) = Self.renewedSubscription(original: "t-v1", renewalID: "t-v2", now: now)
            try await StoreKitTrust.deviceReported(first, account: "reversed", trust: trust, env: env)
            let roots = FileManager.default.temporaryDirectory.appendingPathComponent("store-reversal-\(UUID().uuidString).pem")
            defer { try? FileManager.default.removeItem(at: roots) }
            let settings = try Self.storeSettings(double, trust: trust, roots: roots)
            let engine = ResolutionEngine(pool: env.pool, catalogue: .default)
            func repair(_ history: [JWSTransactionPayload]) async throws -> String {
                try await Self.history(double, "t-v1", history, trust: trust)
                let out = try await Command.run(["reconcile", "--against-store", "--account", "reversed"], env: env, extra: settings)
                #expect(out.status == 0, "\(out.stderr)")
                _ = try await engine.resolvePendingBatch(limit: 10)
                return out.stdout
            }

            // The renewal, repaired from the store; then refunded; then the refund reversed.
            #expect(try await repair([first, renewal]).contains("1 store reports submitted"))
            #expect(try await Self.entitlementStatus(env, "reversed", "premium") == "active")
            var refunded = renewal
            refunded.revocationDate = now.addingTimeInterval(-3_600)
            refunded.revocationReason = 0
            refunded.signedDate = now.addingTimeInterval(-3_600)
            #expect(try await repair([first, refunded]).contains("1 store reports submitted"))
            #expect(try await Self.entitlementStatus(env, "reversed", "premium") == "revoked")
            var reinstated = renewal
            reinstated.signedDate = now.addingTimeInterval(-60)
            let stdout = try await repair([first, reinstated])
            #expect(stdout.contains("1 store reports submitted"), "\(stdout)")
            #expect(try await Self.entitlementStatus(env, "reversed", "premium") == "active", "the reversal was taken for the store's word before the refund")
        }
    }

    @Test("an App Store Server API answer whose renewal info is of another environment than its transaction (and the API) is ignored, counted and logged, and changes nothing")
    func answerOfMixedEnvironmentsIsIgnored() async throws {
        try await TestEnvironment.withFresh { env in
            let trust = try StoreKitTrust()
            let double = try await AppStoreDouble(bundleID: StoreKitTrust.bundleID)
            let now = Date()
            let day: TimeInterval = 86_400
            let transaction = StoreKitTrust.transaction(
                original: "t-x1", purchased: now.addingTimeInterval(-day), expires: now.addingTimeInterval(29 * day), signed: now.addingTimeInterval(-day))
            try await StoreKitTrust.deviceReported(transaction, account: "mixed", trust: trust, env: env)
            // The production API answers with the production transaction and sandbox renewal info
            // saying auto-renew is off.
            let sandboxRenewal = try trust.renewalInfo(original: "t-x1", autoRenew: false, billingRetry: false, grace: nil, signed: now, environment: "Sandbox")
            try await double.script("GET", "/inApps/v1/subscriptions/t-x1", [AppStoreDouble.Answer(json: [
                "data": [["lastTransactions": [[
                    "status": 1, "originalTransactionId": "t-x1", "signedTransactionInfo": .string(try trust.authority.sign(transaction)),
                    "signedRenewalInfo": .string(sandboxRenewal),
                ]]]],
            ])])
            try await Self.history(double, "t-x1", [transaction], trust: trust)
            let roots = FileManager.default.temporaryDirectory.appendingPathComponent("store-mixed-\(UUID().uuidString).pem")
            defer { try? FileManager.default.removeItem(at: roots) }
            // Both environments accepted (a staging server), so that only the cross-check refuses.
            var settings = try Self.storeSettings(double, trust: trust, roots: roots)
            settings["SUBSYNC_STORE_ENVIRONMENTS"] = "production,sandbox"

            let out = try await Command.run(["reconcile", "--against-store", "--account", "mixed"], env: env, extra: settings)
            #expect(out.status == 0, "\(out.stdout) \(out.stderr)")
            #expect(out.stdout.contains("no drift"), "\(out.stdout)")
            #expect(out.stderr.contains("environment_mismatch"), "\(out.stderr)")
            let json = try await Command.run(["reconcile", "--against-store", "--account", "mixed", "--dry-run", "--json"], env: env, extra: settings)
            #expect((json.object["summary"] as? [String: Any])?["unverified"] as? Int == 1)
            #expect(try await env.scalar("SELECT count(*) FROM reports WHERE account_id = 'mixed' AND source = 'store'") == 0)
        }
    }
}
