import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import Postgres
import SyncCore
import SyncService
import SyncStore
import Testing
import TestSupport

/// docs/STOREKIT.md through the API: signed reports, `SUBSYNC_REQUIRE_SIGNED`, App Store Server
/// Notifications V2 and account binding, against a real database and our own certificate chain.
@Suite("Trust: signed reports, notifications and account binding over HTTP")
struct TrustAPITests {
    let trust: StoreKitTrust
    var authority: TestCertificateAuthority { trust.authority }
    var verifier: StoreKitVerifier { trust.verifier }

    init() throws {
        trust = try StoreKitTrust()
    }

    // MARK: - Policy

    @Test("with signatures required, an unsigned report is refused (signature_required) and nothing is stored")
    func unsignedRefused() async throws {
        try await TestEnvironment.withFresh { env in
            let app = try env.application(requireSigned: true, verifier: verifier)
            try await app.test(.router) { client in
                let (status, json) = try await client.sync(account: "acct-unsigned", body: try StoreKitTrust.unsignedBody(reportID: "u1"))
                #expect(status == .unprocessableContent)
                #expect(json.errorCode == "signature_required")
            }
            #expect(try await env.count("reports", accountID: "acct-unsigned") == 0)
            #expect(try await env.count("devices", accountID: "acct-unsigned") == 0)
        }
    }

    @Test("a forged far-future expiry grants nothing when signatures are required; the signed expiry is what counts")
    func forgedExpiry() async throws {
        try await TestEnvironment.withFresh { env in
            let app = try env.application(requireSigned: true, verifier: verifier)
            let now = Date()
            try await app.test(.router) { client in
                // 1. Unsigned, claiming business until 2099: refused, the account stays free.
                let (refused, _) = try await client.sync(account: "acct-forge", body: try StoreKitTrust.unsignedBody(reportID: "f1"))
                #expect(refused == .unprocessableContent)
                // 2. Self-signed chain (a stranger's root) with the same claim: untrusted.
                let stranger = try TestCertificateAuthority(name: "stranger")
                let forged = try stranger.sign(StoreKitTrust.transaction(
                    original: "9001", product: "voip.business.yearly", purchased: now.addingTimeInterval(-60),
                    expires: RFC3339.parse("2099-01-01T00:00:00Z"), signed: now))
                let (untrusted, untrustedJSON) = try await client.sync(account: "acct-forge", body: try StoreKitTrust.signedBody(reportID: "f2", jws: forged))
                #expect(untrusted == .unprocessableContent)
                #expect(untrustedJSON.errorCode == "untrusted_chain")
                let (_, free) = try await client.getJSON("/v1/accounts/acct-forge")
                #expect(free["tier"] as? String == "free")

                // 3. Genuinely signed premium (already expired), while the device's JSON claims
                //    business until 2099: the stored state follows the signature.
                let expired = now.addingTimeInterval(-3600)
                let jws = try authority.sign(StoreKitTrust.transaction(
                    original: "9002", purchased: now.addingTimeInterval(-86_400 * 31), expires: expired, signed: now.addingTimeInterval(-60)))
                let (accepted, json) = try await client.sync(account: "acct-forge", body: try StoreKitTrust.signedBody(reportID: "f3", jws: jws))
                #expect(accepted == .accepted)
                let account = try #require(json["account"] as? [String: Any])
                #expect(account["tier"] as? String == "free")
                let entitlement = try #require((account["entitlements"] as? [[String: Any]])?.first)
                #expect(entitlement["product_id"] as? String == "voip.premium.monthly")
                #expect(entitlement["original_transaction_id"] as? String == "9002")
                #expect(entitlement["status"] as? String == "expired")
                let storedExpiry = try #require((entitlement["expires_at"] as? String).flatMap(RFC3339.parse))
                #expect(abs(storedExpiry.timeIntervalSince(expired.roundedToMilliseconds)) < 0.002)
            }
            let rows = try await env.pool.query(
                "SELECT verified, signed_date IS NOT NULL, product_id, expires_at FROM reports WHERE account_id = 'acct-forge'")
            #expect(rows.count == 1)
            #expect(try rows[0].decode(Bool.self, at: 0))
            #expect(try rows[0].decode(Bool.self, at: 1))
            #expect(try rows[0].decode(String.self, at: 2) == "voip.premium.monthly")
        }
    }

    @Test("each way a signed transaction can be wrong is refused with its own code, and nothing is stored")
    func rejectionCodes() async throws {
        try await TestEnvironment.withFresh { env in
            let app = try env.application(requireSigned: true, verifier: verifier)
            let now = Date()
            let good = StoreKitTrust.transaction(original: "7000", purchased: now.addingTimeInterval(-60), expires: now.addingTimeInterval(86_400), signed: now)
            let valid = try authority.sign(good)
            let parts = valid.split(separator: ".").map(String.init)
            let payloadJSON = try TestCertificateAuthority.payloadJSON(good)

            var tamperedClaims = good
            tamperedClaims.expiresDate = RFC3339.parse("2099-01-01T00:00:00Z")
            let tamperedPayload = parts[0] + "." + TestCertificateAuthority.base64URL(try TestCertificateAuthority.payloadJSON(tamperedClaims)) + "." + parts[2]
            let tamperedHeader = TestCertificateAuthority.base64URL(try authority.header(extra: ["kid": "x"])) + "." + parts[1] + "." + parts[2]
            let otherKey = try authority.sign(header: try authority.header(), payload: payloadJSON, key: P256.Signing.PrivateKey())
            let algNone = TestCertificateAuthority.base64URL(try authority.header(alg: "none")) + "." + parts[1] + "."
            // HS256 keyed with the leaf's public key: the classic algorithm-confusion forgery.
            let hsHeader = try authority.header(alg: "HS256")
            let hsInput = TestCertificateAuthority.signingInput(header: hsHeader, payload: payloadJSON)
            let hsKey = SymmetricKey(data: authority.leafKey.publicKey.derRepresentation)
            let hsMAC = HMAC<SHA256>.authenticationCode(for: Data(hsInput.utf8), using: hsKey)
            let hs256 = hsInput + "." + TestCertificateAuthority.base64URL(Data(hsMAC))
            let stranger = try TestCertificateAuthority(name: "stranger").sign(good)
            let missingIntermediate = try authority.sign(
                header: try authority.header(x5c: [try TestCertificateAuthority.x5cEntry(authority.leaf), try TestCertificateAuthority.x5cEntry(authority.root)]),
                payload: payloadJSON)
            let wrongOID = try TestCertificateAuthority(leafPolicyOID: TestCertificateAuthority.unrelatedOID)
            let wrongOIDVerifier = try StoreKitVerifier(rootCertificates: [wrongOID.root], bundleID: StoreKitTrust.bundleID, allowedEnvironments: [.production])
            let expiredAuthority = try TestCertificateAuthority(
                leafValidity: now.addingTimeInterval(-86_400 * 400)...now.addingTimeInterval(-86_400), now: now)
            let expiredVerifier = try StoreKitVerifier(
                rootCertificates: [expiredAuthority.root], bundleID: StoreKitTrust.bundleID, allowedEnvironments: [.production])
            let wrongBundle = try authority.sign(StoreKitTrust.transaction(
                original: "7000", purchased: now, expires: nil, signed: now, bundle: "com.example.other"))
            let wrongEnvironment = try authority.sign(StoreKitTrust.transaction(
                original: "7000", purchased: now, expires: nil, signed: now, environment: "Sandbox"))

            let cases: [(name: String, jws: String, verifier: StoreKitVerifier, code: String)] = [
                ("tampered payload", tamperedPayload, verifier, "bad_signature"),
                ("tampered header", tamperedHeader, verifier, "bad_signature"),
                ("wrong signature", otherKey, verifier, "bad_signature"),
                ("alg none", algNone, verifier, "unsupported_algorithm"),
                ("HS256 with the public key", hs256, verifier, "unsupported_algorithm"),
                ("untrusted root", stranger, verifier, "untrusted_chain"),
                ("missing intermediate", missingIntermediate, verifier, "untrusted_chain"),
                ("wrong policy OID", try wrongOID.sign(good), wrongOIDVerifier, "untrusted_chain"),
                ("expired certificate", try expiredAuthority.sign(good), expiredVerifier, "certificate_expired"),
                ("wrong bundle id", wrongBundle, verifier, "wrong_bundle"),
                ("wrong environment", wrongEnvironment, verifier, "wrong_environment"),
            ]
            for (index, testCase) in cases.enumerated() {
                let account = "acct-reject-\(index)"
                let app = try env.application(requireSigned: true, verifier: testCase.verifier)
                try await app.test(.router) { client in
                    let (status, json) = try await client.sync(account: account, body: try StoreKitTrust.signedBody(reportID: "r", jws: testCase.jws))
                    #expect(status == .unprocessableContent, "\(testCase.name)")
                    #expect(json.errorCode == testCase.code, "\(testCase.name): \(json)")
                }
                #expect(try await env.count("reports", accountID: account) == 0, "\(testCase.name) stored a report")
                #expect(try await env.count("devices", accountID: account) == 0, "\(testCase.name) stored a device")
            }
            // The valid one, for contrast, is accepted by the same app.
            try await app.test(.router) { client in
                let (status, _) = try await client.sync(account: "acct-valid", body: try StoreKitTrust.signedBody(reportID: "r", jws: valid))
                #expect(status == .accepted)
            }
            #expect(try await env.count("reports", accountID: "acct-valid") == 1)
        }
    }

    @Test("with signatures optional, unsigned reports are stored unverified, and a bad signature is still refused")
    func optionalSignatures() async throws {
        try await TestEnvironment.withFresh { env in
            let app = try env.application(requireSigned: false, verifier: verifier)
            try await app.test(.router) { client in
                let (status, _) = try await client.sync(account: "acct-optional", body: try StoreKitTrust.unsignedBody(reportID: "o1"))
                #expect(status == .accepted)
                let stranger = try TestCertificateAuthority(name: "stranger").sign(StoreKitTrust.transaction(
                    original: "1", purchased: Date(), expires: nil, signed: Date()))
                let (refused, json) = try await client.sync(account: "acct-optional", body: try StoreKitTrust.signedBody(reportID: "o2", jws: stranger))
                #expect(refused == .unprocessableContent)
                #expect(json.errorCode == "untrusted_chain")
            }
            let rows = try await env.pool.query("SELECT report_id, verified FROM reports WHERE account_id = 'acct-optional'")
            #expect(rows.count == 1)
            #expect(try rows[0].decode(Bool.self, at: 1) == false)
        }
    }

    // MARK: - Notifications

    @Test("App Store notifications: REFUND after a device's active report revokes, REFUND_REVERSED restores, a duplicate is ignored")
    func refundAndReversal() async throws {
        try await TestEnvironment.withFresh { env in
            let app = try env.application(requireSigned: true, verifier: verifier)
            let now = Date()
            let purchased = now.addingTimeInterval(-86_400)
            let expires = now.addingTimeInterval(86_400 * 29)
            let token = UUID()
            try await app.test(.router) { client in
                let device = try authority.sign(StoreKitTrust.transaction(
                    original: "5000", purchased: purchased, expires: expires, signed: now.addingTimeInterval(-600), token: token))
                let (status, json) = try await client.sync(account: "acct-refund", body: try StoreKitTrust.signedBody(reportID: "d1", jws: device))
                #expect(status == .accepted)
                #expect((json["account"] as? [String: Any])?["tier"] as? String == "premium")

                // REFUND: Apple's transaction carries the revocation.
                let refundUUID = UUID()
                let refund = try trust.notification("REFUND", uuid: refundUUID, transaction: StoreKitTrust.transaction(
                    original: "5000", purchased: purchased, expires: expires, signed: now.addingTimeInterval(-300),
                    revoked: now.addingTimeInterval(-320), token: token), signed: now.addingTimeInterval(-300))
                let first = try await client.postJSON("/v1/notifications/apple", body: refund, credential: nil)
                #expect(first.status == .ok)
                #expect(first.json["status"] as? String == "applied")
                #expect(first.json["account_id"] == nil, "the unauthenticated caller is not told the account")
                #expect(try await trust.notificationAccount(env, refundUUID) == "acct-refund")
                let revoked = try await trust.settled(client, "acct-refund")
                #expect(revoked["tier"] as? String == "free")
                #expect(trust.entitlementStatus(revoked) == "revoked")

                // The same notification again: acknowledged, nothing new stored.
                let again = try await client.postJSON("/v1/notifications/apple", body: refund, credential: nil)
                #expect(again.status == .ok)
                #expect(again.json["status"] as? String == "duplicate")

                // A stale device report (no revocation, signed before the refund) cannot un-revoke.
                let stale = try authority.sign(StoreKitTrust.transaction(
                    original: "5000", purchased: purchased, expires: expires, signed: now.addingTimeInterval(-500), token: token))
                _ = try await client.sync(account: "acct-refund", body: try StoreKitTrust.signedBody(reportID: "d2", jws: stale))
                #expect(trust.entitlementStatus(try await trust.settled(client, "acct-refund")) == "revoked")

                // REFUND_REVERSED: signed later, without revocation: restored.
                let reversed = try trust.notification("REFUND_REVERSED", transaction: StoreKitTrust.transaction(
                    original: "5000", purchased: purchased, expires: expires, signed: now.addingTimeInterval(-60), token: token),
                    signed: now.addingTimeInterval(-60))
                let restore = try await client.postJSON("/v1/notifications/apple", body: reversed, credential: nil)
                #expect(restore.json["status"] as? String == "applied")
                let restored = try await trust.settled(client, "acct-refund")
                #expect(restored["tier"] as? String == "premium")
                #expect(trust.entitlementStatus(restored) == "active")
            }
            let stored = try await env.pool.query(
                "SELECT count(*) FILTER (WHERE source = 'store'), count(*) FROM reports WHERE account_id = 'acct-refund'")
            #expect(try stored[0].decode(Int.self, at: 0) == 2)
            #expect(try stored[0].decode(Int.self, at: 1) == 4)
            let types = try await env.pool.query("SELECT type FROM events WHERE account_id = 'acct-refund' ORDER BY sequence")
                .map { try $0.decode(String.self, at: 0) }
            #expect(types.contains("entitlement.revoked"))
            #expect(types.contains("entitlement.restored"))
        }
    }

    // MARK: - An operator's revocation

    /// A premium purchase of `account` (original `original`) synced by the user's own device,
    /// revoked by an operator through the admin API; returns the device's token and the purchase.
    func operatorRevokedPurchase(
        _ client: some TestClientProtocol, env: TestEnvironment, account: String, original: String, now: Date
    ) async throws -> (token: String, transaction: JWSTransactionPayload) {
        let token = try await env.token(for: account)
        let purchase = StoreKitTrust.transaction(
            original: original, purchased: now.addingTimeInterval(-86_400), expires: now.addingTimeInterval(86_400 * 29),
            signed: now.addingTimeInterval(-600))
        let (status, json) = try await client.sync(
            account: account, body: try StoreKitTrust.signedBody(reportID: "\(original)-d1", jws: try authority.sign(purchase)), credential: token)
        #expect(status == .accepted)
        #expect((json["account"] as? [String: Any])?["tier"] as? String == "premium")
        let revoke = try await client.postJSON(
            "/v1/admin/accounts/\(account)/revoke",
            body: try JSONSerialization.data(withJSONObject: ["transaction_id": original, "reason": "fraud", "actor": "ops"]))
        #expect(revoke.status == .ok)
        #expect(revoke.json["revoked"] as? Bool == true)
        #expect(trust.entitlementStatus(try await trust.settled(client, account)) == "revoked")
        return (token, purchase)
    }

    /// The operator's unrevoke of `original`, after which the account is premium again.
    func operatorUnrevokes(_ client: some TestClientProtocol, account: String, original: String) async throws {
        let unrevoke = try await client.postJSON(
            "/v1/admin/accounts/\(account)/unrevoke",
            body: try JSONSerialization.data(withJSONObject: ["transaction_id": original, "reason": "cleared", "actor": "ops"]))
        #expect(unrevoke.status == .ok)
        #expect(unrevoke.json["recorded"] as? Bool == true)
        #expect(unrevoke.json["revoked"] as? Bool == false)
        let restored = try await trust.settled(client, account)
        #expect(trust.entitlementStatus(restored) == "active")
        #expect(restored["tier"] as? String == "premium")
    }

    @Test("an operator's revoke stands when the user syncs the same purchase signed afresh afterwards; only the operator's unrevoke lifts it")
    func operatorRevokeOutlivesResignedReport() async throws {
        try await TestEnvironment.withFresh { env in
            let app = try env.application(requireSigned: true, verifier: verifier)
            try await app.test(.router) { client in
                let (token, purchase) = try await operatorRevokedPurchase(client, env: env, account: "acct-fraud", original: "7000", now: Date())
                // The user toggles auto-renew (or calls AppStore.sync()): StoreKit hands the app
                // the transaction signed after the revoke, and the app syncs it.
                var resigned = purchase
                resigned.signedDate = Date().addingTimeInterval(1)
                let (status, json) = try await client.sync(
                    account: "acct-fraud", body: try StoreKitTrust.signedBody(reportID: "7000-d2", jws: try authority.sign(resigned)), credential: token)
                #expect(status == .accepted)
                #expect(json["accepted"] as? Int == 1, "a new report: \(json)")
                let after = try await trust.settled(client, "acct-fraud")
                #expect(trust.entitlementStatus(after) == "revoked")
                #expect(after["tier"] as? String == "free")

                try await operatorUnrevokes(client, account: "acct-fraud", original: "7000")
            }
        }
    }

    @Test("an operator's revoke stands against later App Store notifications without a revocation, a refund's reversal included")
    func operatorRevokeOutlivesNotifications() async throws {
        try await TestEnvironment.withFresh { env in
            let app = try env.application(requireSigned: true, verifier: verifier)
            try await app.test(.router) { client in
                let (_, purchase) = try await operatorRevokedPurchase(client, env: env, account: "acct-fraud", original: "7100", now: Date())
                // The user turns auto-renew off: Apple notifies with the transaction signed anew.
                let later = Date().addingTimeInterval(1)
                var resigned = purchase
                resigned.signedDate = later
                let renewal = try trust.notification(
                    "DID_CHANGE_RENEWAL_STATUS", transaction: resigned, signed: later,
                    renewal: ["originalTransactionId": "7100", "autoRenewStatus": 0, "environment": "Production",
                              "signedDate": (later.timeIntervalSince1970 * 1000).rounded()])
                let answer = try await client.postJSON("/v1/notifications/apple", body: renewal, credential: nil)
                #expect(answer.json["status"] as? String == "applied")
                #expect(trust.entitlementStatus(try await trust.settled(client, "acct-fraud")) == "revoked")

                // The store refunds and reverses its refund: that lifts the store's revocation only.
                var refunded = purchase
                refunded.signedDate = later.addingTimeInterval(1)
                refunded.revocationDate = later.addingTimeInterval(1)
                refunded.revocationReason = 0
                let refund = try trust.notification("REFUND", transaction: refunded, signed: later.addingTimeInterval(1))
                #expect(try await client.postJSON("/v1/notifications/apple", body: refund, credential: nil).json["status"] as? String == "applied")
                var reversed = purchase
                reversed.signedDate = later.addingTimeInterval(2)
                let reversal = try trust.notification("REFUND_REVERSED", transaction: reversed, signed: later.addingTimeInterval(2))
                #expect(try await client.postJSON("/v1/notifications/apple", body: reversal, credential: nil).json["status"] as? String == "applied")
                #expect(trust.entitlementStatus(try await trust.settled(client, "acct-fraud")) == "revoked")

                try await operatorUnrevokes(client, account: "acct-fraud", original: "7100")
            }
        }
    }

    @Test("notifications: token lookup, renewal info, unmatched purchases, TEST, and bad signatures")
    func notificationRouting() async throws {
        try await TestEnvironment.withFresh { env in
            let app = try env.application(requireSigned: true, verifier: verifier)
            let now = Date()
            try await app.test(.router) { client in
                // An account whose id is the token itself (apps that use the account UUID).
                let token = UUID()
                let accountID = token.uuidString.lowercased()
                let device = try authority.sign(StoreKitTrust.transaction(
                    original: "6000", purchased: now.addingTimeInterval(-60), expires: now.addingTimeInterval(86_400), signed: now.addingTimeInterval(-30)))
                _ = try await client.sync(account: accountID, body: try StoreKitTrust.signedBody(reportID: "d1", jws: device))
                // DID_FAIL_TO_RENEW with renewal info: billing retry with a grace period.
                let grace = now.addingTimeInterval(3 * 86_400)
                let failedUUID = UUID()
                let failed = try trust.notification(
                    "DID_FAIL_TO_RENEW", uuid: failedUUID,
                    transaction: StoreKitTrust.transaction(
                        original: "6000", purchased: now.addingTimeInterval(-86_400 * 31), expires: now.addingTimeInterval(-60),
                        signed: now.addingTimeInterval(-10), token: token),
                    signed: now.addingTimeInterval(-10),
                    renewal: ["originalTransactionId": "6000", "autoRenewStatus": 1, "isInBillingRetryPeriod": true,
                              "gracePeriodExpiresDate": (grace.timeIntervalSince1970 * 1000).rounded(),
                              "environment": "Production", "signedDate": (now.timeIntervalSince1970 * 1000).rounded()])
                let answer = try await client.postJSON("/v1/notifications/apple", body: failed, credential: nil)
                #expect(answer.json["status"] as? String == "applied")
                #expect(try await trust.notificationAccount(env, failedUUID) == accountID)

                // A purchase nobody has reported yet: acknowledged and kept as unmatched.
                let orphan = try trust.notification("SUBSCRIBED", transaction: StoreKitTrust.transaction(
                    original: "6999", purchased: now, expires: now.addingTimeInterval(86_400), signed: now), signed: now)
                let unmatched = try await client.postJSON("/v1/notifications/apple", body: orphan, credential: nil)
                #expect(unmatched.status == .ok)
                #expect(unmatched.json["status"] as? String == "unmatched")

                // TEST carries no transaction.
                let test = try trust.notification("TEST", transaction: nil, signed: now)
                #expect(try await client.postJSON("/v1/notifications/apple", body: test, credential: nil).json["status"] as? String == "ignored")

                // Signed by a stranger: 422 with the code; not JSON: 400.
                let strangerCA = try TestCertificateAuthority(name: "stranger")
                let forgedJWS = try strangerCA.sign(header: try strangerCA.header(), payload: try JSONSerialization.data(withJSONObject: [
                    "notificationType": "REFUND", "notificationUUID": UUID().uuidString, "signedDate": 1_750_000_000_000,
                    "data": ["bundleId": StoreKitTrust.bundleID, "environment": "Production"],
                ] as [String: Any]))
                let forged = try await client.postJSON(
                    "/v1/notifications/apple", body: try JSONSerialization.data(withJSONObject: ["signedPayload": forgedJWS]), credential: nil)
                #expect(forged.status == .unprocessableContent)
                #expect(forged.json.errorCode == "untrusted_chain")
                let garbage = try await client.postJSON("/v1/notifications/apple", body: Data("{\"signedPayload\": 3}".utf8), credential: nil)
                #expect(garbage.status == .badRequest)
            }
            let account = try await env.pool.query(
                "SELECT in_billing_retry, grace_period_expires_at IS NOT NULL FROM reports WHERE source = 'store'")
            #expect(account.count == 1)
            #expect(try account[0].decode(Bool.self, at: 0))
            #expect(try account[0].decode(Bool.self, at: 1))
            let statuses = try await env.pool.query("SELECT status, count(*) FROM store_notifications GROUP BY status ORDER BY status")
                .map { "\(try $0.decode(String.self, at: 0))=\(try $0.decode(Int.self, at: 1))" }
            #expect(statuses == ["applied=1", "ignored=1", "unmatched=1"])
        }
    }

    @Test("a notification and the device's first sync of its purchase, at the same moment: the notification is applied either way")
    func notificationRacesFirstBinding() async throws {
        try await TestEnvironment.withFresh { env in
            let app = try env.application(requireSigned: true, verifier: verifier)
            let now = Date()
            let purchased = now.addingTimeInterval(-3600)
            let expires = now.addingTimeInterval(29 * 86_400)
            let rounds = 16
            try await app.test(.router) { client in
                let outcomes = try await withThrowingTaskGroup(of: String?.self) { group in
                    for round in 0..<rounds {
                        let original = "race-\(round)"
                        let refund = try trust.notification("REFUND", transaction: StoreKitTrust.transaction(
                            original: original, purchased: purchased, expires: expires, signed: now.addingTimeInterval(-60),
                            revoked: now.addingTimeInterval(-90)), signed: now.addingTimeInterval(-60))
                        let device = try StoreKitTrust.signedBody(reportID: "r\(round)", jws: try authority.sign(StoreKitTrust.transaction(
                            original: original, purchased: purchased, expires: expires, signed: now.addingTimeInterval(-600))))
                        group.addTask { try await client.postJSON("/v1/notifications/apple", body: refund, credential: nil).json["status"] as? String }
                        group.addTask {
                            let (status, _) = try await client.sync(account: "acct-race-\(round)", body: device, waitMilliseconds: nil)
                            return status == .accepted ? nil : "sync \(status)"
                        }
                    }
                    var outcomes: [String] = []
                    for try await outcome in group { if let outcome { outcomes.append(outcome) } }
                    return outcomes
                }
                #expect(outcomes.allSatisfy { $0 == "applied" || $0 == "unmatched" }, "\(outcomes)")
                for round in 0..<rounds {
                    #expect(trust.entitlementStatus(try await trust.settled(client, "acct-race-\(round)")) == "revoked", "round \(round)")
                }
            }
            let statuses = try await env.pool.query("SELECT status, count(*) FROM store_notifications GROUP BY status")
                .map { "\(try $0.decode(String.self, at: 0))=\(try $0.decode(Int.self, at: 1))" }
            #expect(statuses == ["applied=\(rounds)"], "no notification left unmatched")
        }
    }

    /// The purchase's advisory lock is written twice, in `TransactionBinder.lockPurchases` (a
    /// store notification) and in `subsync_bind_claims` (sql/0024, a binding): the race above is
    /// safe only while both name the same lock.
    @Test("a store notification's lock of a purchase is the lock its binding takes: the binding waits for it")
    func notificationAndBindingShareThePurchaseLock() async throws {
        try await TestEnvironment.withFresh { env in
            let binder = TransactionBinder(pool: env.pool, engine: ResolutionEngine(pool: env.pool, catalogue: .default), policy: .reject)
            // The holder keeps the lock however slow the machine (no idle timeout ends it); it
            // lets go right after the wait below, whatever the wait found.
            let holder = try await Connection.connect(configuration: env.connection)
            try await holder.execute(script: "SET idle_in_transaction_session_timeout = 0; BEGIN")
            try await binder.lockPurchases(["shared-purchase"], on: holder)
            let binding = Task {
                try await binder.submit(
                    accountID: "binder", device: nil, reports: [],
                    claims: [PurchaseClaim(originalTransactionID: "shared-purchase", appAccountToken: nil)])
            }
            let queued = try await waitUntil(seconds: 300) {
                try await env.pool.query(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                )[0].decode(Int.self, at: 0) == 1
            }
            #expect(queued, "the binding did not wait for the notification's lock")
            let whileHeld = try await env.pool.query("SELECT count(*) FROM transaction_owners")
            #expect(try whileHeld[0].decode(Int.self, at: 0) == 0)
            try await holder.execute(script: "COMMIT")
            await holder.close()
            let outcome = try await binding.value
            #expect(outcome.transfers.isEmpty)
            let owners = try await env.pool.query("SELECT account_id FROM transaction_owners WHERE original_transaction_id = 'shared-purchase'")
            #expect(try owners.map { try $0.decode(String.self, at: 0) } == ["binder"])
        }
    }

    /// The one way a store notification meets a binding conflict: its account was found through
    /// the purchase's token, and while it waited for the purchase's lock another account bound
    /// the purchase. Apple cannot be answered 409, so the fact goes where the purchase is, and
    /// the recorded notification names that account (`AppStoreNotificationStore.assign`).
    @Test("a notification whose purchase another account binds while it waits for the purchase's lock is applied to that account")
    func notificationMeetingABindingGoesToThePurchasesOwner() async throws {
        try await TestEnvironment.withFresh { env in
            let key = StoreKitTrust.appAccountTokenKey
            let app = try env.application(requireSigned: true, verifier: verifier, binding: .reject, appAccountTokenKey: key)
            let token = try #require(AppAccountTokens(key: key).token(for: "acct-token"))
            let binder = TransactionBinder(pool: env.pool, engine: ResolutionEngine(pool: env.pool, catalogue: .default), policy: .reject)
            let now = Date()
            try await app.test(.router) { client in
                // The token is bound to its account by that account's own purchase.
                let own = try authority.sign(StoreKitTrust.transaction(
                    original: "8400", purchased: now.addingTimeInterval(-60), expires: now.addingTimeInterval(86_400), signed: now, token: token))
                #expect(try await client.sync(account: "acct-token", body: try StoreKitTrust.signedBody(reportID: "t1", jws: own)).status == .accepted)

                // Another connection holds the lock of purchase 8401, as a first binding does.
                // No idle timeout: the holder must not be ended while the test uses it.
                let holder = try await Connection.connect(configuration: env.connection)
                try await holder.execute(script: "SET idle_in_transaction_session_timeout = 0; BEGIN")
                try await binder.lockPurchases(["8401"], on: holder)
                let uuid = UUID()
                let renewal = try trust.notification("DID_RENEW", uuid: uuid, transaction: StoreKitTrust.transaction(
                    original: "8401", purchased: now.addingTimeInterval(-60), expires: now.addingTimeInterval(2 * 86_400), signed: now,
                    token: token), signed: now)
                let answer = Task {
                    let response = try await client.postJSON("/v1/notifications/apple", body: renewal, credential: nil)
                    return (response.status, response.json["status"] as? String)
                }
                // No account has 8401 yet, so the token names acct-token, whose binding waits.
                let waiting = try await waitUntil(seconds: 300) {
                    try await env.pool.query(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                    )[0].decode(Int.self, at: 0) == 1
                }
                #expect(waiting, "the notification's binding did not wait for the purchase's lock")
                // Meanwhile acct-owner binds the purchase, and commits.
                _ = try await binder.submit(
                    accountID: "acct-owner", device: nil, reports: [],
                    claims: [PurchaseClaim(originalTransactionID: "8401", appAccountToken: nil)], on: holder)
                try await holder.execute(script: "COMMIT")
                await holder.close()

                let (status, outcome) = try await answer.value
                #expect(status == .ok)
                #expect(outcome == "applied")
                #expect(try await trust.notificationAccount(env, uuid) == "acct-owner", "the notification names the purchase's owner")
                #expect(trust.entitlementStatus(try await trust.settled(client, "acct-owner")) == "active")
            }
            let reports = try await env.pool.query(
                "SELECT account_id, source FROM reports WHERE original_transaction_id = '8401'")
                .map { "\(try $0.decode(String.self, at: 0)) \(try $0.decode(String.self, at: 1))" }
            #expect(reports == ["acct-owner store"], "the notification's report is the owner's alone")
            #expect(try await env.count("reports", accountID: "acct-token") == 1)
        }
    }

    @Test("signed renewal info on /sync: a subscriber in the billing grace period keeps access; renewal info that does not fit is refused")
    func renewalInfoOnSync() async throws {
        try await TestEnvironment.withFresh { env in
            let app = try env.application(requireSigned: true, verifier: verifier)
            let now = Date()
            // The last renewal failed an hour ago; the App Store retries, with three days of grace.
            let lapsed = StoreKitTrust.transaction(
                original: "8000", purchased: now.addingTimeInterval(-31 * 86_400), expires: now.addingTimeInterval(-3600),
                signed: now.addingTimeInterval(-3000))
            let grace = now.addingTimeInterval(3 * 86_400).roundedToMilliseconds
            try await app.test(.router) { client in
                // The transaction alone: expired, and the device's own grace field is ignored.
                let (alone, _) = try await client.sync(account: "acct-grace", body: try StoreKitTrust.signedBody(reportID: "g1", jws: try authority.sign(lapsed)))
                #expect(alone == .accepted)
                var state = try await trust.settled(client, "acct-grace")
                #expect(trust.entitlementStatus(state) == "expired")
                #expect(state["tier"] as? String == "free")

                let renewal = try trust.renewalInfo(original: "8000", autoRenew: true, billingRetry: true, grace: grace, signed: now.addingTimeInterval(-60))
                let (withRenewal, _) = try await client.sync(
                    account: "acct-grace", body: try StoreKitTrust.signedBody(reportID: "g2", jws: try authority.sign(lapsed), renewal: renewal))
                #expect(withRenewal == .accepted)
                state = try await trust.settled(client, "acct-grace")
                #expect(trust.entitlementStatus(state) == "grace_period")
                #expect(state["tier"] as? String == "premium")

                // Refused, storing nothing: renewal info of another purchase, one signed by a
                // stranger, and renewal info without its transaction.
                let before = try await env.count("reports", accountID: "acct-grace")
                let other = try trust.renewalInfo(original: "8001", autoRenew: true, billingRetry: true, grace: grace, signed: now)
                let (mismatch, mismatchJSON) = try await client.sync(
                    account: "acct-grace", body: try StoreKitTrust.signedBody(reportID: "g3", jws: try authority.sign(lapsed), renewal: other))
                #expect(mismatch == .unprocessableContent)
                #expect(mismatchJSON.errorCode == "invalid_report")
                let stranger = try TestCertificateAuthority(name: "stranger")
                let forged = try trust.renewalInfo(original: "8000", autoRenew: true, billingRetry: true, grace: grace, signed: now, ca: stranger)
                let (untrusted, untrustedJSON) = try await client.sync(
                    account: "acct-grace", body: try StoreKitTrust.signedBody(reportID: "g4", jws: try authority.sign(lapsed), renewal: forged))
                #expect(untrusted == .unprocessableContent)
                #expect(untrustedJSON.errorCode == "untrusted_chain")
                #expect(untrustedJSON.errorMessage == "reports[0].signed_renewal_info: the certificate chain does not lead to a trusted root")
                let (orphan, orphanJSON) = try await client.sync(
                    account: "acct-grace", body: try StoreKitTrust.signedBody(reportID: "g5", jws: nil, renewal: renewal))
                #expect(orphan == .unprocessableContent)
                #expect(orphanJSON.errorCode == "invalid_report")
                #expect(try await env.count("reports", accountID: "acct-grace") == before)
            }
            let stored = try await env.pool.query(
                "SELECT in_billing_retry, grace_period_expires_at, will_auto_renew FROM reports WHERE account_id = 'acct-grace' ORDER BY report_id")
                .map { (try $0.decode(Bool.self, at: 0), try $0.decode(Date?.self, at: 1), try $0.decode(Bool?.self, at: 2)) }
            #expect(stored.count == 2)
            #expect(stored.first.map { !$0.0 && $0.1 == nil && $0.2 == nil } == true, "g1: nothing taken from the device's JSON")
            // Stored in microseconds: compare within a millisecond, StoreKit's resolution.
            #expect(stored.last.map { $0.0 && abs(($0.1 ?? .distantPast).timeIntervalSince(grace)) < 0.001 && $0.2 == true } == true,
                    "g2: from the renewal info: \(String(describing: stored.last))")
        }
    }

    @Test("signed payloads that go together must be of one environment: Sandbox renewal info beside a Production transaction on /sync, a notification whose transaction or renewal info is of another environment than its own, are refused (environment_mismatch) and store nothing")
    func environmentsMustAgree() async throws {
        try await TestEnvironment.withFresh { env in
            // Both environments accepted (as on a staging server), so that only the cross-check refuses.
            let both = try StoreKitVerifier(rootCertificates: [authority.root], bundleID: StoreKitTrust.bundleID, allowedEnvironments: [.production, .sandbox])
            let app = try env.application(requireSigned: true, verifier: both)
            let now = Date()
            let production = StoreKitTrust.transaction(
                original: "9100", purchased: now.addingTimeInterval(-60), expires: now.addingTimeInterval(30 * 86_400), signed: now.addingTimeInterval(-30))
            let sandboxRenewal = try trust.renewalInfo(original: "9100", autoRenew: true, billingRetry: false, grace: nil, signed: now, environment: "Sandbox")
            let productionRenewal = try trust.renewalInfo(original: "9100", autoRenew: true, billingRetry: false, grace: nil, signed: now)
            // A Sandbox notification carrying a Production transaction (a refund of it), and a
            // Production one carrying Sandbox renewal info (auto-renew off).
            var refunded = production
            refunded.revocationDate = now
            refunded.revocationReason = 0
            let mismatched = [
                try trust.notification("REFUND", transaction: refunded, signed: now, environment: "Sandbox"),
                try trust.notification("DID_CHANGE_RENEWAL_STATUS", transaction: production, signed: now, renewal: [
                    "originalTransactionId": "9100", "autoRenewStatus": 0, "environment": "Sandbox",
                    "signedDate": (now.timeIntervalSince1970 * 1000).rounded(),
                ]),
            ]
            try await app.test(.router) { client in
                let (mixed, mixedJSON) = try await client.sync(
                    account: "acct-env", body: try StoreKitTrust.signedBody(reportID: "e1", jws: try authority.sign(production), renewal: sandboxRenewal))
                #expect(mixed == .unprocessableContent)
                #expect(mixedJSON.errorCode == "environment_mismatch")
                #expect(mixedJSON.errorMessage == #"reports[0].signed_renewal_info: environment "Sandbox" is not that of the payload it goes with ("production")"#)
                #expect(try await env.count("reports", accountID: "acct-env") == 0)
                // Of one environment, the same is accepted.
                let (same, _) = try await client.sync(
                    account: "acct-env", body: try StoreKitTrust.signedBody(reportID: "e2", jws: try authority.sign(production), renewal: productionRenewal))
                #expect(same == .accepted)

                for body in mismatched {
                    let (status, json) = try await client.postJSON("/v1/notifications/apple", body: body, credential: nil)
                    #expect(status == .unprocessableContent)
                    #expect(json.errorCode == "environment_mismatch")
                }
                #expect(try await env.scalar("SELECT count(*) FROM store_notifications") == 0)
                #expect(try await env.count("reports", accountID: "acct-env") == 1)
                let state = try await trust.settled(client, "acct-env")
                #expect(trust.entitlementStatus(state) == "active")
            }
        }
    }

    @Test("a notification that comes before any account has the purchase is applied when the purchase is bound: a refund is not lost")
    func unmatchedAppliedOnBinding() async throws {
        try await TestEnvironment.withFresh { env in
            let app = try env.application(requireSigned: true, verifier: verifier)
            let now = Date()
            let purchased = now.addingTimeInterval(-3600)
            let expires = now.addingTimeInterval(29 * 86_400)
            try await app.test(.router) { client in
                let refund = try trust.notification("REFUND", transaction: StoreKitTrust.transaction(
                    original: "7000", purchased: purchased, expires: expires, signed: now.addingTimeInterval(-60),
                    revoked: now.addingTimeInterval(-90)), signed: now.addingTimeInterval(-60))
                let early = try await client.postJSON("/v1/notifications/apple", body: refund, credential: nil)
                #expect(early.status == .ok)
                #expect(early.json["status"] as? String == "unmatched")

                // The device's first sync of the purchase, signed before the refund: the account
                // gets the refund with it, and stays revoked.
                let device = try authority.sign(StoreKitTrust.transaction(
                    original: "7000", purchased: purchased, expires: expires, signed: now.addingTimeInterval(-600)))
                let (status, _) = try await client.sync(account: "acct-late", body: try StoreKitTrust.signedBody(reportID: "d1", jws: device))
                #expect(status == .accepted)
                let state = try await trust.settled(client, "acct-late")
                #expect(trust.entitlementStatus(state) == "revoked")
                #expect(state["tier"] as? String == "free")

                let again = try await client.postJSON("/v1/notifications/apple", body: refund, credential: nil)
                #expect(again.json["status"] as? String == "duplicate")
                // Another sync of the bound purchase finds nothing left to apply.
                let later = try authority.sign(StoreKitTrust.transaction(
                    original: "7000", purchased: purchased, expires: expires, signed: now.addingTimeInterval(-300)))
                _ = try await client.sync(account: "acct-late", body: try StoreKitTrust.signedBody(reportID: "d2", jws: later))
                #expect(trust.entitlementStatus(try await trust.settled(client, "acct-late")) == "revoked")
            }
            let notifications = try await env.pool.query("SELECT status, account_id FROM store_notifications")
                .map { "\(try $0.decode(String.self, at: 0)) \(try $0.decode(String?.self, at: 1) ?? "-")" }
            #expect(notifications == ["applied acct-late"])
            let stored = try await env.pool.query(
                "SELECT source, verified, revoked_at IS NOT NULL FROM reports WHERE account_id = 'acct-late' ORDER BY source, report_id")
                .map { "\(try $0.decode(String.self, at: 0)) \(try $0.decode(Bool.self, at: 1)) \(try $0.decode(Bool.self, at: 2))" }
            #expect(stored == ["device true false", "device true false", "store true true"])
            let events = try await env.pool.query("SELECT type FROM events WHERE account_id = 'acct-late' ORDER BY sequence")
                .map { try $0.decode(String.self, at: 0) }
            #expect(!events.contains("entitlement.activated"), "the refund arrived with the first report: never active, \(events)")
        }
    }

    @Test("without trusted roots the notifications route is 404 not_configured, and a signed report cannot be verified")
    func notConfigured() async throws {
        try await TestEnvironment.withFresh { env in
            let app = try env.application(requireSigned: false, verifier: nil)
            try await app.test(.router) { client in
                let body = try trust.notification("TEST", transaction: nil, signed: Date())
                let answer = try await client.postJSON("/v1/notifications/apple", body: body, credential: nil)
                #expect(answer.status == .notFound)
                #expect(answer.json.errorCode == "not_configured")
                let jws = try authority.sign(StoreKitTrust.transaction(original: "1", purchased: Date(), expires: nil, signed: Date()))
                let (status, json) = try await client.sync(account: "acct-unconfigured", body: try StoreKitTrust.signedBody(reportID: "r", jws: jws))
                #expect(status == .unprocessableContent)
                #expect(json.errorCode == "verification_unavailable")
            }
            #expect(try await env.count("reports", accountID: "acct-unconfigured") == 0)
        }
    }

    // MARK: - Account binding

    @Test("binding policy reject: a purchase of another account is refused with 409 and nothing is stored")
    func bindingReject() async throws {
        try await TestEnvironment.withFresh { env in
            let app = try env.application(requireSigned: true, verifier: verifier, binding: .reject)
            let now = Date()
            let jws = try authority.sign(StoreKitTrust.transaction(
                original: "8000", purchased: now.addingTimeInterval(-60), expires: now.addingTimeInterval(86_400), signed: now))
            let tokenJWS = try authority.sign(StoreKitTrust.transaction(
                original: "8001", purchased: now.addingTimeInterval(-60), expires: now.addingTimeInterval(86_400), signed: now, token: UUID()))
            try await app.test(.router) { client in
                #expect(try await client.sync(account: "acct-owner", body: try StoreKitTrust.signedBody(reportID: "a1", jws: jws)).status == .accepted)
                #expect(try await client.sync(account: "acct-owner", body: try StoreKitTrust.signedBody(reportID: "a2", jws: tokenJWS)).status == .accepted)
                // The same device report again on the owner is fine (idempotent).
                #expect(try await client.sync(account: "acct-owner", body: try StoreKitTrust.signedBody(reportID: "a1", jws: jws)).json["duplicates"] as? Int == 1)
                let (status, json) = try await client.sync(account: "acct-thief", body: try StoreKitTrust.signedBody(reportID: "b1", jws: jws))
                #expect(status == .conflict)
                #expect(json.errorCode == "purchase_bound_to_another_account")
                #expect(!(json.errorMessage?.contains("acct-owner") ?? true), "the other account must not be revealed")
            }
            #expect(try await env.count("reports", accountID: "acct-thief") == 0)
            #expect(try await env.count("devices", accountID: "acct-thief") == 0)
            let owner = try await env.pool.query("SELECT account_id FROM transaction_owners WHERE original_transaction_id = '8000'")
            #expect(try owner[0].decode(String.self, at: 0) == "acct-owner")
        }
    }

    @Test("forged notifications cost one signature check each and no chain work, a failed chain is built once, and a flood meets 429")
    func forgedNotificationsAreCheap() async throws {
        try await TestEnvironment.withFresh { env in
            let now = Date()
            let clock = ManualClock()
            // A fresh verifier, so its count of chain validations starts at zero.
            let fresh = try StoreKitVerifier(rootCertificates: [authority.root], bundleID: StoreKitTrust.bundleID, allowedEnvironments: [.production])
            let limit = RateLimiter.Limit(ratePerSecond: 0.2, burst: 5)
            let app = try env.application(verifier: fresh, notificationRateLimit: limit, clock: clock)
            try await app.test(.router) { client in
                // The real chain, a signature of random bytes.
                for _ in 0..<5 {
                    let body = try trust.notification("DID_RENEW", transaction: nil, signed: now)
                    let json = try #require(JSONSerialization.jsonObject(with: body) as? [String: String])
                    let parts = try #require(json["signedPayload"]).split(separator: ".")
                    let forged = parts[0] + "." + parts[1] + "." + TestCertificateAuthority.base64URL(Data((0..<64).map { _ in UInt8.random(in: 0...255) }))
                    let answer = try await client.postJSON(
                        "/v1/notifications/apple", body: try JSONSerialization.data(withJSONObject: ["signedPayload": forged]), credential: nil)
                    #expect(answer.status == .unprocessableContent)
                    #expect(answer.json.errorCode == "bad_signature")
                }
                #expect(fresh.chainValidations == 0, "a forged signature reached the chain check")
                // The sixth within the burst's refill time is refused before any work.
                try await client.execute(
                    uri: "/v1/notifications/apple", method: .post, headers: [.contentType: "application/json"],
                    body: ByteBuffer(bytes: try trust.notification("DID_RENEW", transaction: nil, signed: now))
                ) { response in
                    #expect(response.status == .tooManyRequests)
                    #expect(response.headers[.retryAfter] == "5")
                }
                clock.advance(by: .seconds(5))
                let genuine = try await client.postJSON("/v1/notifications/apple", body: try trust.notification("TEST", transaction: nil, signed: now), credential: nil)
                #expect(genuine.status == .ok)
                #expect(fresh.chainValidations == 1)
            }
            // A correctly signed token whose chain leads nowhere trusted: the chain is built once.
            let stranger = try TestCertificateAuthority(name: "stranger")
            let strangerApp = try env.application(verifier: fresh, notificationRateLimit: nil)
            try await strangerApp.test(.router) { client in
                for _ in 0..<4 {
                    let payload: [String: Any] = [
                        "notificationType": "TEST", "notificationUUID": UUID().uuidString, "version": "2.0",
                        "signedDate": (now.timeIntervalSince1970 * 1000).rounded(), "data": ["bundleId": StoreKitTrust.bundleID, "environment": "Production"],
                    ]
                    let jws = try stranger.sign(header: try stranger.header(), payload: try JSONSerialization.data(withJSONObject: payload))
                    let answer = try await client.postJSON(
                        "/v1/notifications/apple", body: try JSONSerialization.data(withJSONObject: ["signedPayload": jws]), credential: nil)
                    #expect(answer.json.errorCode == "untrusted_chain")
                }
            }
            #expect(fresh.chainValidations == 2, "the stranger's chain was built more than once")
        }
    }

    @Test("a genuine signed transaction resent under fresh report ids is stored once; new facts about it are stored")
    func resentSignedTransactionIsStoredOnce() async throws {
        try await TestEnvironment.withFresh { env in
            let app = try env.application(requireSigned: true, verifier: verifier)
            let now = Date()
            let jws = try authority.sign(StoreKitTrust.transaction(
                original: "9100", purchased: now.addingTimeInterval(-60), expires: now.addingTimeInterval(86_400), signed: now))
            try await app.test(.router) { client in
                let reports: [[String: Any]] = (0..<100).map { index in
                    ["report_id": "flood-\(index)", "observed_at": RFC3339.format(now.addingTimeInterval(Double(index))), "signed_transaction": jws]
                }
                let flood = try JSONSerialization.data(withJSONObject: ["device": ["id": "phone"], "reports": reports])
                let first = try await client.sync(account: "acct-flood", body: flood, waitMilliseconds: nil)
                #expect(first.status == .accepted)
                #expect(first.json["accepted"] as? Int == 1)
                #expect(first.json["duplicates"] as? Int == 99)
                // Again, and from another device: the same facts, nothing new.
                let again = try await client.sync(account: "acct-flood", body: try StoreKitTrust.signedBody(reportID: "other", jws: jws, device: "ipad"), waitMilliseconds: nil)
                #expect(again.json["duplicates"] as? Int == 1)
                #expect(try await env.count("reports", accountID: "acct-flood") == 1)
                // Renewal info that says something new about the same transaction is new facts.
                let renewal = try trust.renewalInfo(original: "9100", autoRenew: false, billingRetry: false, grace: nil, signed: now)
                let changed = try await client.sync(account: "acct-flood", body: try StoreKitTrust.signedBody(reportID: "renewal", jws: jws, renewal: renewal), waitMilliseconds: nil)
                #expect(changed.json["accepted"] as? Int == 1)
                // So is a later signing of the transaction (a renewal).
                let renewed = try authority.sign(StoreKitTrust.transaction(
                    original: "9100", purchased: now.addingTimeInterval(-60), expires: now.addingTimeInterval(2 * 86_400), signed: now.addingTimeInterval(1)))
                #expect(try await client.sync(account: "acct-flood", body: try StoreKitTrust.signedBody(reportID: "renewed", jws: renewed), waitMilliseconds: nil).json["accepted"] as? Int == 1)
                #expect(try await env.count("reports", accountID: "acct-flood") == 3)
                let state = try await trust.settled(client, "acct-flood")
                #expect(trust.entitlementStatus(state) == "active")
            }
            let reconciler = Reconciler(pool: env.pool, catalogue: .default)
            #expect(try await reconciler.reconcile(accounts: ["acct-flood"], repair: false).differences == [])
        }
    }

    @Test("an appAccountToken binds only to its own account: a purchase carrying another account's token cannot claim it")
    func tokenCannotBeClaimed() async throws {
        try await TestEnvironment.withFresh { env in
            let key = StoreKitTrust.appAccountTokenKey
            let app = try env.application(requireSigned: true, verifier: verifier, binding: .reject, appAccountTokenKey: key)
            let victimToken = try #require(AppAccountTokens(key: key).token(for: "acct-victim"))
            #expect(AppAccountTokens(key: key).token(for: "acct-attacker") != victimToken)
            let now = Date()
            let purchases = try ["8300", "8301"].map { original in
                try authority.sign(StoreKitTrust.transaction(
                    original: original, purchased: now.addingTimeInterval(-60), expires: now.addingTimeInterval(86_400), signed: now,
                    token: victimToken))
            }
            try await app.test(.router) { client in
                // The account state tells the app which token to put on its purchases.
                let state = try await client.getJSON("/v1/accounts/acct-victim").json
                #expect(state["app_account_token"] as? String == victimToken.uuidString.lowercased())

                // A tampered client puts the victim's token on the attacker's own purchase: stored
                // for the attacker (it is a real purchase), but the token binds to no one.
                #expect(try await client.sync(account: "acct-attacker", body: try StoreKitTrust.signedBody(reportID: "x1", jws: purchases[0])).status == .accepted)
                let bound = try await env.pool.query("SELECT count(*) FROM app_account_tokens WHERE app_account_token = \(victimToken.uuidString.lowercased())::uuid")
                #expect(try bound[0].decode(Int.self, at: 0) == 0)

                // The victim's own purchase with its own token is accepted, and binds the token.
                let (status, json) = try await client.sync(account: "acct-victim", body: try StoreKitTrust.signedBody(reportID: "v1", jws: purchases[1]))
                #expect(status == .accepted, "\(json)")
                let owner = try await env.pool.query("SELECT account_id FROM app_account_tokens WHERE app_account_token = \(victimToken.uuidString.lowercased())::uuid")
                #expect(try owner.map { try $0.decode(String.self, at: 0) } == ["acct-victim"])

                // The store's notification about the attacker's purchase goes to its owner, not to
                // the account its token names.
                let renewalUUID = UUID()
                let renewal = try trust.notification("DID_RENEW", uuid: renewalUUID, transaction: StoreKitTrust.transaction(
                    original: "8300", purchased: now.addingTimeInterval(-60), expires: now.addingTimeInterval(2 * 86_400), signed: now,
                    token: victimToken), signed: now)
                let answer = try await client.postJSON("/v1/notifications/apple", body: renewal, credential: nil)
                #expect(answer.json["status"] as? String == "applied")
                #expect(try await trust.notificationAccount(env, renewalUUID) == "acct-attacker")
                // A purchase no account has yet, with the victim's (bound) token, goes to the victim.
                let newUUID = UUID()
                let newPurchase = try trust.notification("SUBSCRIBED", uuid: newUUID, transaction: StoreKitTrust.transaction(
                    original: "8302", purchased: now, expires: now.addingTimeInterval(86_400), signed: now, token: victimToken), signed: now)
                #expect(try await client.postJSON("/v1/notifications/apple", body: newPurchase, credential: nil).json["status"] as? String == "applied")
                #expect(try await trust.notificationAccount(env, newUUID) == "acct-victim")
            }
            #expect(try await env.count("reports", accountID: "acct-attacker") == 2)
            #expect(try await env.count("reports", accountID: "acct-victim") == 2)
        }
    }

    @Test("binding race: two accounts reporting one new purchase at once, exactly one wins and the other gets 409")
    func bindingRace() async throws {
        try await TestEnvironment.withFresh { env in
            let app = try env.application(requireSigned: true, verifier: verifier, binding: .reject)
            let now = Date()
            try await app.testLive { client in
                for round in 0..<8 {
                    let jws = try authority.sign(StoreKitTrust.transaction(
                        original: "race-\(round)", purchased: now.addingTimeInterval(-60), expires: now.addingTimeInterval(86_400), signed: now))
                    let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                        for account in ["acct-race-a", "acct-race-b", "acct-race-c"] {
                            group.addTask {
                                try await client.sync(
                                    account: account, body: try StoreKitTrust.signedBody(reportID: "r\(round)", jws: jws), waitMilliseconds: nil).status
                            }
                        }
                        return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
                    }
                    #expect(statuses.filter { $0 == .accepted }.count == 1, "round \(round): \(statuses)")
                    #expect(statuses.filter { $0 == .conflict }.count == 2, "round \(round): \(statuses)")
                    let stored = try await env.pool.query(
                        "SELECT count(DISTINCT account_id) FROM reports WHERE original_transaction_id = \("race-\(round)")")
                    #expect(try stored[0].decode(Int.self, at: 0) == 1, "round \(round): the purchase is in more than one account")
                }
            }
        }
    }

    @Test("binding policy transfer: the purchase moves, both accounts get entitlement.transferred, and reconcile finds no drift")
    func bindingTransfer() async throws {
        try await TestEnvironment.withFresh { env in
            let app = try env.application(requireSigned: true, verifier: verifier, binding: .transfer)
            let now = Date()
            let jws = try authority.sign(StoreKitTrust.transaction(
                original: "8100", purchased: now.addingTimeInterval(-60), expires: now.addingTimeInterval(86_400), signed: now))
            try await app.test(.router) { client in
                let (first, before) = try await client.sync(account: "acct-old", body: try StoreKitTrust.signedBody(reportID: "old-1", jws: jws))
                #expect(first == .accepted)
                #expect((before["account"] as? [String: Any])?["tier"] as? String == "premium")
                let (moved, after) = try await client.sync(account: "acct-new", body: try StoreKitTrust.signedBody(reportID: "new-1", jws: jws))
                #expect(moved == .accepted)
                #expect((after["account"] as? [String: Any])?["tier"] as? String == "premium")
                let old = try await trust.settled(client, "acct-old")
                #expect(old["tier"] as? String == "free")
            }
            for account in ["acct-old", "acct-new"] {
                let rows = try await env.pool.query(
                    "SELECT payload FROM events WHERE account_id = \(account) AND type = 'entitlement.transferred'")
                #expect(rows.count == 1, "\(account)")
                let transfer = try rows[0].decode(JSONColumn<Event>.self, at: 0).value.transfer
                #expect(transfer == Transfer(originalTransactionID: "8100", fromAccountID: "acct-old", toAccountID: "acct-new"))
            }
            #expect(try await env.count("reports", accountID: "acct-old") == 0)
            // The moved report and the new one are the same signed facts: stored once.
            #expect(try await env.count("reports", accountID: "acct-new") == 1)
            let sequences = try await env.pool.query("SELECT account_id, array_agg(sequence ORDER BY sequence)::text FROM events GROUP BY account_id")
            for row in sequences {
                let account = try row.decode(String.self, at: 0)
                let text = try row.decode(String.self, at: 1)
                let numbers = text.trimmingCharacters(in: CharacterSet(charactersIn: "{}")).split(separator: ",").compactMap { Int($0) }
                #expect(numbers == Array(1...numbers.count), "gap in \(account)'s sequences: \(text)")
            }
            let reconciler = Reconciler(pool: env.pool, catalogue: .default)
            let result = try await reconciler.reconcile(accounts: ["acct-new", "acct-old"], repair: false)
            #expect(result.accountsWithDrift == 0, "\(result.differences)")
        }
    }

    @Test("a sync carrying two transactions of one purchase (a renewal) moves it once: one entitlement.transferred each side")
    func transferOfARenewedPurchaseIsOneTransfer() async throws {
        try await TestEnvironment.withFresh { env in
            let app = try env.application(requireSigned: true, verifier: verifier, binding: .transfer)
            let now = Date()
            let first = try authority.sign(StoreKitTrust.transaction(
                original: "8600", purchased: now.addingTimeInterval(-86_400 * 40), expires: now.addingTimeInterval(-86_400 * 10), signed: now))
            let renewal = try authority.sign(StoreKitTrust.transaction(
                original: "8600", id: "8601", purchased: now.addingTimeInterval(-86_400 * 10), expires: now.addingTimeInterval(86_400 * 20),
                signed: now))
            try await app.test(.router) { client in
                _ = try await client.sync(account: "renewed-old", body: try StoreKitTrust.signedBody(reportID: "o-1", jws: first))
                _ = try await trust.settled(client, "renewed-old")
                var body = try JSONSerialization.jsonObject(with: try StoreKitTrust.signedBody(reportID: "n-1", jws: first)) as? [String: Any] ?? [:]
                let second = try JSONSerialization.jsonObject(with: try StoreKitTrust.signedBody(reportID: "n-2", jws: renewal)) as? [String: Any] ?? [:]
                body["reports"] = ((body["reports"] as? [Any]) ?? []) + ((second["reports"] as? [Any]) ?? [])
                let (moved, _) = try await client.sync(account: "renewed-new", body: try JSONSerialization.data(withJSONObject: body))
                #expect(moved == .accepted)
                _ = try await trust.settled(client, "renewed-new")
                _ = try await trust.settled(client, "renewed-old")
            }
            for account in ["renewed-old", "renewed-new"] {
                #expect(try await env.scalar(
                    "SELECT count(*) FROM events WHERE account_id = '\(account)' AND type = 'entitlement.transferred'") == 1, "\(account)")
            }
            let result = try await Reconciler(pool: env.pool, catalogue: .default).reconcile(accounts: ["renewed-new", "renewed-old"], repair: false)
            #expect(result.accountsWithDrift == 0, "\(result.differences)")
        }
    }

    @Test("a transferred minute pack is credited to one account only: the old account is debited, and reconcile agrees")
    func transferredPackIsCreditedOnce() async throws {
        try await TestEnvironment.withFresh { env in
            let app = try env.application(requireSigned: true, verifier: verifier, binding: .transfer)
            let now = Date()
            let jws = try signedPack("8200", purchased: now.addingTimeInterval(-60), signed: now)
            try await app.test(.router) { client in
                _ = try await client.sync(account: "pack-old", body: try StoreKitTrust.signedBody(reportID: "p-old", jws: jws))
                _ = try await trust.settled(client, "pack-old")
                _ = try await client.sync(account: "pack-new", body: try StoreKitTrust.signedBody(reportID: "p-new", jws: jws))
                _ = try await trust.settled(client, "pack-new")
                _ = try await trust.settled(client, "pack-old")
            }
            let ledger = UsageLedger(pool: env.pool, catalogue: .default)
            #expect(try await ledger.balances(of: "pack-new", now: Date()).first?.credits == 100)
            #expect(try await ledger.balances(of: "pack-old", now: Date()).first?.credits == 0)
            #expect(try await env.scalar("SELECT count(*) FROM usage_entries WHERE account_id = 'pack-old' AND entry_id = 'credit_transferred:8200'") == 1)
            #expect(try await env.scalar("SELECT count(*) FROM events WHERE type = 'credits.granted'") == 2)
            let reconciler = Reconciler(pool: env.pool, catalogue: .default)
            let result = try await reconciler.reconcile(accounts: ["pack-new", "pack-old"], repair: false)
            #expect(result.accountsWithDrift == 0, "\(result.differences)")
        }
    }

    @Test("a minute pack that moves to another account and back, and over again, is always credited to the one that has it")
    func packMovingBackAndForth() async throws {
        try await TestEnvironment.withFresh { env in
            let app = try env.application(requireSigned: true, verifier: verifier, binding: .transfer)
            let now = Date()
            let jws = try signedPack("8400", purchased: now.addingTimeInterval(-60), signed: now)
            let ledger = UsageLedger(pool: env.pool, catalogue: .default)
            let reconciler = Reconciler(pool: env.pool, catalogue: .default)
            try await app.test(.router) { client in
                for (round, (to, from)) in [("move-a", "move-b"), ("move-b", "move-a"), ("move-a", "move-b"), ("move-b", "move-a")].enumerated() {
                    _ = try await client.sync(account: to, body: try StoreKitTrust.signedBody(reportID: "p-\(round)", jws: jws))
                    _ = try await trust.settled(client, to)
                    _ = try await trust.settled(client, from)
                    #expect(try await ledger.balances(of: to, now: Date()).first?.credits == 100, "round \(round): \(to) has the pack")
                    #expect(try await ledger.balances(of: from, now: Date()).first?.credits == 0, "round \(round): \(from) does not")
                    let result = try await reconciler.reconcile(accounts: ["move-a", "move-b"], repair: false)
                    #expect(result.accountsWithDrift == 0, "round \(round): \(result.differences)")
                }
            }
            // Each arrival announced once: the first credit, then a credit again for each return.
            #expect(try await env.scalar("SELECT count(*) FROM events WHERE type = 'credits.granted'") == 4)
            #expect(try await env.scalar("SELECT count(*) FROM usage_entries WHERE entry_id LIKE 'credit_transferred:8400%'") == 3)
        }
    }

    @Test("a minute pack spent in one account and moved on, twice, yields its units once: what was spent of it is billed where it was spent")
    func spentPackMovedTwiceMintsNothing() async throws {
        // A modified client keeps a pack's JWS and syncs it into account after account, spending
        // it in each before it moves on.
        try await TestEnvironment.withFresh { env in
            let app = try env.application(requireSigned: true, verifier: verifier, binding: .transfer)
            let jws = try signedPack("8500", purchased: Date().addingTimeInterval(-60), signed: Date())
            let ledger = UsageLedger(pool: env.pool, catalogue: .default)
            let accounts = ["spend-a", "spend-b", "spend-c"]
            try await app.test(.router) { client in
                for (index, account) in accounts.enumerated() {
                    _ = try await client.sync(account: account, body: try StoreKitTrust.signedBody(reportID: "s-\(index)", jws: jws))
                    _ = try await trust.settled(client, account)
                    if index > 0 { _ = try await trust.settled(client, accounts[index - 1]) }
                    #expect(try await ledger.balances(of: account, now: Date()).first?.credits == 100, "\(account) has the pack")
                    guard index < 2 else { continue }
                    // 200 minutes: the free tier's 100, then the pack's 100.
                    let used = try await client.postJSON(
                        "/v1/accounts/\(account)/usage", body: try UsageAPITests.usageBody(device: "phone", [("call", 200, Date())]))
                    #expect(used.status.code / 100 == 2 && used.json["accepted"] as? Int == 1, "\(used.json)")
                }
                var spentUnbilled = 0
                for account in accounts {
                    let balance = try #require(try await ledger.balances(of: account, now: Date()).first)
                    let periods = balance.periods + (balance.unallocated.map { [$0] } ?? [])
                    let fromCredits = periods.reduce(0) { $0 + $1.fromCredits }
                    let reclaimed = periods.reduce(0) { $0 + $1.reclaimed }
                    spentUnbilled += fromCredits - reclaimed
                    if account == "spend-c" {
                        #expect(balance.credits == 100 && reclaimed == 0, "\(balance)")
                    } else {
                        // The pack's 100 were spent here, then left: billed as overage, no debt left.
                        #expect(fromCredits == 100 && reclaimed == 100, "\(account): \(balance)")
                        #expect(periods.reduce(0) { $0 + $1.overage } == 100, "\(account): \(balance)")
                        #expect(balance.credits == 0, "\(account): \(balance)")
                        // What the account is shown and billed: GET /usage.
                        let usage = try await client.getJSON("/v1/accounts/\(account)/usage").json
                        let meters = usage["meters"] as? [[String: Any]] ?? []
                        let minutes = try #require(
                            meters.lazy.compactMap { $0["balance"] as? [String: Any] }.first { $0["meter"] as? String == "minutes" }, "\(usage)")
                        #expect(minutes["overage_units"] as? Int == 100 && minutes["reclaimed_units"] as? Int == 100, "\(minutes)")
                    }
                }
                // In all, the pack gave at most its 100 units: none spent unbilled, 100 left in C.
                #expect(spentUnbilled <= 0)
                let reconciled = try await Reconciler(pool: env.pool, catalogue: .default).reconcile(accounts: accounts, repair: false)
                #expect(reconciled.accountsWithDrift == 0, "\(reconciled.differences)")
            }
        }
    }

    @Test("a refunded minute pack that moves to another account is not taken back from the old one a second time")
    func transferredRefundedPackIsNotDebitedTwice() async throws {
        try await TestEnvironment.withFresh { env in
            let app = try env.application(requireSigned: true, verifier: verifier, binding: .transfer)
            let now = Date()
            let bought = try signedPack("8300", purchased: now.addingTimeInterval(-120), signed: now.addingTimeInterval(-120))
            let refunded = try signedPack(
                "8300", purchased: now.addingTimeInterval(-120), signed: now.addingTimeInterval(-60), revoked: now.addingTimeInterval(-60))
            try await app.test(.router) { client in
                _ = try await client.sync(account: "refunded-old", body: try StoreKitTrust.signedBody(reportID: "r-old", jws: bought))
                _ = try await trust.settled(client, "refunded-old")
                _ = try await client.sync(account: "refunded-old", body: try StoreKitTrust.signedBody(reportID: "r-refund", jws: refunded))
                _ = try await trust.settled(client, "refunded-old")
                _ = try await client.sync(account: "refunded-new", body: try StoreKitTrust.signedBody(reportID: "r-new", jws: bought))
                _ = try await trust.settled(client, "refunded-new")
                _ = try await trust.settled(client, "refunded-old")
            }
            let ledger = UsageLedger(pool: env.pool, catalogue: .default)
            // Refunded before it moved: nothing to take back from the old account (it was -100).
            #expect(try await ledger.balances(of: "refunded-old", now: Date()).first?.credits == 0)
            #expect(try await env.scalar("SELECT count(*) FROM usage_entries WHERE account_id = 'refunded-old' AND entry_id = 'credit_transferred:8300'") == 0)
            // The new account has the purchase with its refund: credited and taken back.
            #expect(try await ledger.balances(of: "refunded-new", now: Date()).first?.credits == 0)
            #expect(try await env.scalar("SELECT count(*) FROM usage_entries WHERE account_id = 'refunded-new' AND kind IN ('credit', 'credit_revoked')") == 2)
            let result = try await Reconciler(pool: env.pool, catalogue: .default).reconcile(accounts: ["refunded-new", "refunded-old"], repair: false)
            #expect(result.accountsWithDrift == 0, "\(result.differences)")
        }
    }

    // MARK: - Helpers

    /// A minute pack's signed transaction (`voip.credits.100`), refunded at `revoked` if given.
    func signedPack(_ original: String, purchased: Date, signed: Date, revoked: Date? = nil) throws -> String {
        try authority.sign(StoreKitTrust.transaction(
            original: original, product: "voip.credits.100", purchased: purchased, expires: nil, signed: signed, revoked: revoked))
    }
}

extension Date {
    /// StoreKit dates are whole milliseconds.
    var roundedToMilliseconds: Date {
        Date(timeIntervalSince1970: (timeIntervalSince1970 * 1000).rounded() / 1000)
    }
}
