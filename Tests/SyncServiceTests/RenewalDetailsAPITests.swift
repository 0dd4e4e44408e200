import Foundation
import HummingbirdTesting
import Postgres
import SubsyncClient
import SyncCore
@testable import SyncService
import SyncStore
import TestSupport
import Testing

/// Renewal details in the state (docs/RESOLUTION.md, *Renewal details*), from each of the three
/// sources of signed renewal info (a device's sync, an App Store notification, an App Store
/// Server API answer) to the account read, SubsyncClient's snapshot and the signed webhook,
/// against a real database, the store double and the Python receiver.
@Suite("Renewal details from devices, notifications and the store", .serialized)
struct RenewalDetailsAPITests {
    /// Signed renewal info of `original` with the given fields (Apple's JWSRenewalInfoDecodedPayload).
    static func renewal(
        _ trust: StoreKitTrust, original: String, autoRenew: Bool, product: String, renewsTo: String,
        expirationIntent: Int? = nil, priceIncrease: Int? = nil, renewalDate: Date? = nil, signed: Date
    ) throws -> String {
        var payload: [String: Any] = [
            "originalTransactionId": original, "productId": product, "autoRenewProductId": renewsTo,
            "autoRenewStatus": autoRenew ? 1 : 0, "isInBillingRetryPeriod": false, "environment": "Production",
            "signedDate": (signed.timeIntervalSince1970 * 1000).rounded(),
        ]
        if let expirationIntent { payload["expirationIntent"] = expirationIntent }
        if let priceIncrease { payload["priceIncreaseStatus"] = priceIncrease }
        if let renewalDate { payload["renewalDate"] = (renewalDate.timeIntervalSince1970 * 1000).rounded() }
        return try trust.authority.sign(header: try trust.authority.header(), payload: try JSONSerialization.data(withJSONObject: payload))
    }

    static func premium(_ account: [String: Any]) -> [String: Any]? {
        (account["entitlements"] as? [[String: Any]])?.first { $0["id"] as? String == "premium" }
    }

    @Test("a pending crossgrade from the device, its cancellation and a price increase accepted from a notification, the end from the store: each reaches the state, the client and the webhook; older renewal info changes nothing")
    func threeSources() async throws {
        let receiver = try await WebhookReceiver()
        try await TestEnvironment.withFresh { env in
            let trust = try StoreKitTrust()
            let double = try await AppStoreDouble(bundleID: StoreKitTrust.bundleID)
            let (_, secret) = try await EndpointStore(pool: env.pool).create(url: receiver.url("/renewals"), eventTypes: nil)
            try await receiver.setSecrets([secret.text])
            let now = Date().roundedToMilliseconds
            let day: TimeInterval = 86_400
            let expires = now.addingTimeInterval(20 * day)
            let transaction = StoreKitTrust.transaction(
                original: "t-rd1", product: "voip.premium.monthly", purchased: now.addingTimeInterval(-10 * day), expires: expires,
                signed: now.addingTimeInterval(-10 * day))
            let signedTransaction = try trust.authority.sign(transaction)
            let app = try env.application(
                deliveryWorkers: 1, webhookGuard: WebhookDeliveryTests.loopback, requireSigned: true, verifier: trust.verifier,
                appStoreAPI: try AppStoreDouble.client(double))
            try await app.testLive { client in
                let port = try #require(client.port)

                // 1. The device: a crossgrade to yearly is pending, a price increase awaits consent.
                try await ClientTests.withFolder { folder in
                    let device = try ClientTests.client(env, port: port, account: "rita", folder: folder)
                    let fromDevice = try Self.renewal(
                        trust, original: "t-rd1", autoRenew: true, product: "voip.premium.monthly", renewsTo: "voip.premium.yearly",
                        priceIncrease: 0, renewalDate: expires, signed: now.addingTimeInterval(-120))
                    #expect(try await device.sync([Purchase(signedTransaction: signedTransaction, signedRenewalInfo: fromDevice)]) == .delivered(1))
                    let snapshot = try await device.refresh()
                    let entitlement = try #require(snapshot.entitlements.first { $0.id == "premium" })
                    #expect(entitlement.willRenew)
                    #expect(entitlement.renewalProductID == "voip.premium.yearly")
                    #expect(entitlement.priceIncreaseStatus == "pending")
                    #expect(entitlement.renewalDate.map { abs($0.timeIntervalSince(expires)) < 0.001 } == true)
                    #expect(entitlement.expirationReason == nil)
                }

                // 2. A notification, signed later: the crossgrade is off, the increase accepted.
                let fromNotification = try trust.notification(
                    "DID_CHANGE_RENEWAL_PREF",
                    transaction: StoreKitTrust.transaction(
                        original: "t-rd1", product: "voip.premium.monthly", purchased: now.addingTimeInterval(-10 * day), expires: expires,
                        signed: now.addingTimeInterval(-60)),
                    signed: now.addingTimeInterval(-60),
                    renewal: [
                        "originalTransactionId": "t-rd1", "productId": "voip.premium.monthly", "autoRenewProductId": "voip.premium.monthly",
                        "autoRenewStatus": 1, "priceIncreaseStatus": 1, "renewalDate": (expires.timeIntervalSince1970 * 1000).rounded(),
                        "environment": "Production", "signedDate": (now.addingTimeInterval(-60).timeIntervalSince1970 * 1000).rounded(),
                    ])
                let applied = try await client.postJSON("/v1/notifications/apple", body: fromNotification, credential: nil)
                #expect(applied.json["status"] as? String == "applied", "\(applied.json)")
                var account = try await trust.settled(client, "rita")
                #expect(Self.premium(account)?["renewal_product_id"] as? String == "voip.premium.monthly")
                #expect(Self.premium(account)?["price_increase_status"] as? String == "accepted")

                // 3. The store, asked by an operator: the subscriber cancelled (expirationIntent 1).
                // Apple signs what it answers when it answers.
                let storeTransaction = try trust.authority.sign(StoreKitTrust.transaction(
                    original: "t-rd1", product: "voip.premium.monthly", purchased: now.addingTimeInterval(-10 * day), expires: expires,
                    signed: now))
                let fromStore = try Self.renewal(
                    trust, original: "t-rd1", autoRenew: false, product: "voip.premium.monthly", renewsTo: "voip.premium.monthly",
                    expirationIntent: 1, signed: now)
                try await double.script("GET", "/inApps/v2/history/t-rd1", [AppStoreDouble.Answer(json: [
                    "hasMore": false, "signedTransactions": [.string(storeTransaction)],
                ])])
                try await double.script("GET", "/inApps/v1/subscriptions/t-rd1", [AppStoreDouble.Answer(json: [
                    "data": [["subscriptionGroupIdentifier": "g", "lastTransactions": [[
                        "status": 1, "originalTransactionId": "t-rd1", "signedTransactionInfo": .string(storeTransaction),
                        "signedRenewalInfo": .string(fromStore),
                    ]]]],
                ])])
                var (status, answer) = try await client.postJSON("/v1/admin/accounts/rita/reconcile-store", body: Data(#"{"dry_run": true}"#.utf8))
                #expect(status == .ok, "\(answer)")
                let fields = Set(((answer["differences"] as? [[String: Any]]) ?? []).compactMap { $0["field"] as? String })
                #expect(fields == [
                    "transactions.will_auto_renew", "renewal.expiration_reason", "renewal.price_increase_status", "renewal.renewal_date",
                ])
                (status, answer) = try await client.postJSON("/v1/admin/accounts/rita/reconcile-store", body: Data(#"{"dry_run": false}"#.utf8))
                #expect(answer["reports_submitted"] as? Int == 1, "\(answer)")
                account = try await trust.settled(client, "rita")
                let ended = try #require(Self.premium(account))
                #expect(ended["will_renew"] as? Bool == false)
                #expect(ended["expiration_reason"] as? String == "cancelled")
                #expect(ended["renewal_product_id"] is NSNull, "no renewal is coming")
                #expect(ended["price_increase_status"] is NSNull, "the store's latest word says nothing of one")
                (status, answer) = try await client.postJSON("/v1/admin/accounts/rita/reconcile-store", body: Data(#"{"dry_run": true}"#.utf8))
                #expect((answer["differences"] as? [[String: Any]])?.isEmpty == true, "\(answer)")

                // A device still holding renewal info signed before the store's answer: stored, but
                // it loses to the later signatures, so nothing changes and no event is written.
                let eventsBefore = try await env.scalar("SELECT count(*) FROM events WHERE account_id = 'rita'")
                let stale = try Self.renewal(
                    trust, original: "t-rd1", autoRenew: true, product: "voip.premium.monthly", renewsTo: "voip.premium.yearly",
                    signed: now.addingTimeInterval(-30))
                let (synced, _) = try await client.sync(
                    account: "rita", body: try StoreKitTrust.signedBody(reportID: "stale", jws: signedTransaction, renewal: stale))
                #expect(synced == .accepted)
                account = try await trust.settled(client, "rita")
                #expect(Self.premium(account)?["expiration_reason"] as? String == "cancelled")
                #expect(Self.premium(account)?["will_renew"] as? Bool == false)
                #expect(try await env.scalar("SELECT count(*) FROM reports WHERE account_id = 'rita' AND report_id = 'stale'") == 1)
                #expect(try await env.scalar("SELECT count(*) FROM events WHERE account_id = 'rita'") == eventsBefore)

                // The webhooks, verified by standardwebhooks and read with SubsyncWebhooks' types.
                let ids = try await env.pool.query("SELECT event_id::text FROM events WHERE account_id = 'rita' ORDER BY sequence")
                    .map { try $0.decode(String.self, at: 0) }
                let received = try await receiver.waitFor { $0.count >= ids.count }
                #expect(received.map(\.id) == ids)
                #expect(received.allSatisfy { !$0.verifiedBy.isEmpty }, "standardwebhooks rejected a signature")
                let premium = received.compactMap { entry in entry.body.flatMap { body in body.data.current.map { (body.type, $0) } } }
                    .filter { $0.1.id == "premium" }
                #expect(premium.first?.0 == "entitlement.activated")
                #expect(premium.first?.1.renewalProductID == "voip.premium.yearly")
                #expect(premium.first?.1.priceIncreaseStatus == "pending")
                let changes = premium.filter { $0.0 == "entitlement.renewal_changed" }.map(\.1)
                #expect(changes.first?.renewalProductID == "voip.premium.monthly")
                #expect(changes.first?.priceIncreaseStatus == "accepted")
                #expect(changes.dropFirst().first?.expirationReason == "cancelled")
                #expect(changes.dropFirst().first?.willRenew == false)
            }
            #expect(try await double.requests().allSatisfy(\.jwt.valid))
        }
    }

    @Test("a notification kept until its purchase is bound keeps its renewal info's signing time: it beats older renewal info the device brings")
    func keptNotificationStaysSigned() async throws {
        try await TestEnvironment.withFresh { env in
            let trust = try StoreKitTrust()
            let now = Date().roundedToMilliseconds
            let day: TimeInterval = 86_400
            let transaction = StoreKitTrust.transaction(
                original: "t-rd2", product: "voip.premium.monthly", purchased: now.addingTimeInterval(-3 * day),
                expires: now.addingTimeInterval(27 * day), signed: now.addingTimeInterval(-3 * day))
            try await env.application(requireSigned: true, verifier: trust.verifier).test(.router) { client in
                // The crossgrade to yearly, told by the App Store before any device synced.
                let notification = try trust.notification(
                    "DID_CHANGE_RENEWAL_PREF", transaction: transaction, signed: now.addingTimeInterval(-60),
                    renewal: [
                        "originalTransactionId": "t-rd2", "productId": "voip.premium.monthly", "autoRenewProductId": "voip.premium.yearly",
                        "autoRenewStatus": 1, "environment": "Production",
                        "signedDate": (now.addingTimeInterval(-60).timeIntervalSince1970 * 1000).rounded(),
                    ])
                let kept = try await client.postJSON("/v1/notifications/apple", body: notification, credential: nil)
                #expect(kept.json["status"] as? String == "unmatched", "\(kept.json)")
                // The device binds the purchase with renewal info it cached an hour ago.
                let cached = try RenewalDetailsAPITests.renewal(
                    trust, original: "t-rd2", autoRenew: true, product: "voip.premium.monthly", renewsTo: "voip.premium.monthly",
                    signed: now.addingTimeInterval(-3600))
                let (status, _) = try await client.sync(
                    account: "nora", body: try StoreKitTrust.signedBody(reportID: "n1", jws: try trust.authority.sign(transaction), renewal: cached))
                #expect(status == .accepted)
                let account = try await trust.settled(client, "nora")
                #expect(Self.premium(account)?["renewal_product_id"] as? String == "voip.premium.yearly", "\(account)")
                #expect(try await env.scalar(
                    "SELECT count(*) FROM reports WHERE account_id = 'nora' AND source = 'store' AND renewal_signed_at IS NOT NULL") == 1)
            }
            // What support reads: `subsync accounts show`.
            let shown = try await SubsyncCommand.run(["accounts", "show", "nora"], env: env)
            #expect(shown.status == 0, "\(shown.stderr)")
            #expect(shown.stdout.contains("renews") && shown.stdout.contains("to voip.premium.yearly"), "\(shown.stdout)")
            let json = try await SubsyncCommand.run(["accounts", "show", "nora", "--json"], env: env)
            let entitlements = ((json.object["state"] as? [String: Any])?["entitlements"] as? [[String: Any]]) ?? []
            #expect(entitlements.first?["renewal_product_id"] as? String == "voip.premium.yearly")
        }
    }
}
