import Foundation
import SubsyncWebhooks
import Testing

@Suite("WebhookVerifier")
struct WebhookVerifierTests {
    /// The Standard Webhooks known-answer secret.
    static let vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    /// A second secret (bytes 0...31), the "new" one of a rotation.
    static let newSecret = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
    /// The attempt's `webhook-timestamp` in the tests below.
    static let attempt: Int64 = 1_772_366_410
    static let now = Date(timeIntervalSince1970: 1_772_366_415)

    // MARK: Signatures

    @Test("Known-answer vector of the Standard Webhooks specification")
    func knownAnswerVector() throws {
        let secret = try WebhookSecret(Self.vectorSecret)
        let body = Data(#"{"test": 2432232314}"#.utf8)
        let signature = WebhookVerifier.signature(
            id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330, body: body, secret: secret)
        #expect(signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
    }

    @Test("The known-answer signature passes verification (then the body is not a delivery)")
    func knownAnswerVerifies() throws {
        let verifier = try WebhookVerifier(secrets: [Self.vectorSecret])
        let headers = [
            "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
            "webhook-timestamp": "1614265330",
            "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
        ]
        let error = #expect(throws: WebhookVerificationError.self) {
            try verifier.verify(
                body: Data(#"{"test": 2432232314}"#.utf8), headers: headers,
                now: Date(timeIntervalSince1970: 1_614_265_330))
        }
        guard case .malformedBody = error else {
            Issue.record("expected malformedBody, got \(String(describing: error))")
            return
        }
    }

    // MARK: Decoding

    @Test("An entitlement event with nested state verifies and decodes every field")
    func entitlementEvent() throws {
        let body = Data(Self.entitlementBody.utf8)
        let headers = try Self.headers(id: Self.entitlementEventID, body: body, secrets: [Self.vectorSecret])
        let verifier = try WebhookVerifier(secrets: [Self.vectorSecret])
        let delivery = try verifier.verify(body: body, headers: headers, now: Self.now)

        #expect(delivery.id == Self.entitlementEventID)
        #expect(delivery.type == .activated)
        #expect(delivery.type.isKnown)
        #expect(isClose(delivery.timestamp, 1_772_366_400.123456))

        let event = delivery.event
        #expect(event.id == Self.entitlementEventID)
        #expect(event.accountID == "acct_42")
        #expect(event.sequence == 7)
        #expect(event.type == .activated)
        #expect(isClose(event.occurredAt, 1_772_366_400.123456))
        #expect(event.entitlementID == "pro")
        #expect(event.previous == nil)
        #expect(event.previousTier == "free")
        #expect(event.transfer == nil)
        #expect(event.credit == nil)
        #expect(event.usage == nil)

        let current = try #require(event.current)
        #expect(current.id == "pro")
        #expect(current.tier == "pro")
        #expect(current.status == .active)
        #expect(current.isActive == true)
        #expect(current.grantsAccess)
        #expect(current.productID == "com.example.pro.monthly")
        #expect(current.productKind == "auto_renewable")
        #expect(current.sourceTransactionID == "2000000123")
        #expect(current.originalTransactionID == "2000000100")
        #expect(current.purchasedAt == Date(timeIntervalSince1970: 1_772_366_398))
        #expect(current.expiresAt == Date(timeIntervalSince1970: 1_775_044_800))
        #expect(current.periodEndsAt == Date(timeIntervalSince1970: 1_775_044_800))
        #expect(current.gracePeriodExpiresAt == nil)
        #expect(current.willRenew == true)
        #expect(current.revokedAt == nil)
        #expect(current.revocationReason == nil)

        let state = event.state
        #expect(state.tier == "pro")
        #expect(state.features == ["export", "sync"])
        #expect(state.allows("sync"))
        #expect(!state.allows("teams"))
        let limits: [String: WebhookLimit] = ["devices": .limited(5), "monthly_minutes": .unlimited]
        #expect(state.limits == limits)
        #expect(state.ads == false)
        #expect(state.nextTransitionAt == Date(timeIntervalSince1970: 1_775_044_800))
        #expect(state.entitlements.count == 2)

        let basic = try #require(state.entitlement("basic"))
        #expect(basic.status == .revoked)
        #expect(basic.isActive == nil)
        #expect(!basic.grantsAccess)
        #expect(basic.productKind == "non_renewing")
        #expect(basic.expiresAt == nil)
        #expect(basic.periodEndsAt == nil)
        #expect(isClose(basic.gracePeriodExpiresAt, 1_768_467_600))
        #expect(basic.willRenew == false)
        #expect(isClose(basic.revokedAt, 1_771_582_500.5))
        #expect(basic.revocationReason == "developer_issue")

        let pro = try #require(state.entitlement("pro"))
        #expect(pro.isActive == nil)
        #expect(pro.status == .active)
        #expect(pro.grantsAccess)
        #expect(pro.expiresAt == current.expiresAt)
    }

    @Test("A usage event verifies and decodes every field")
    func usageEvent() throws {
        let body = Data(Self.usageBody.utf8)
        let headers = try Self.headers(id: Self.usageEventID, body: body, secrets: [Self.vectorSecret])
        let verifier = try WebhookVerifier(secrets: [Self.vectorSecret])
        let delivery = try verifier.verify(body: body, headers: headers, now: Self.now)

        #expect(delivery.id == Self.usageEventID)
        #expect(delivery.type == .usageLow)
        #expect(delivery.timestamp == Date(timeIntervalSince1970: 1_773_131_400))
        let event = delivery.event
        #expect(event.sequence == 8)
        #expect(event.type == .usageLow)
        #expect(isClose(event.occurredAt, 1_773_131_400.5))
        #expect(event.entitlementID == nil)
        #expect(event.previous == nil)
        #expect(event.current == nil)
        #expect(event.previousTier == nil)
        #expect(event.state.tier == "free")
        #expect(event.state.features.isEmpty)
        let limits: [String: WebhookLimit] = ["monthly_minutes": .limited(100)]
        #expect(event.state.limits == limits)
        #expect(event.state.ads)
        #expect(event.state.entitlements.isEmpty)
        #expect(event.state.nextTransitionAt == nil)

        let usage = try #require(event.usage)
        #expect(usage.meter == "minutes")
        #expect(usage.unit == "minute")
        #expect(usage.periodStart == Date(timeIntervalSince1970: 1_772_323_200))
        #expect(usage.periodEnd == Date(timeIntervalSince1970: 1_775_001_600))
        #expect(usage.allowance == .limited(100))
        #expect(usage.used == 92)
        #expect(usage.fromAllowance == 90)
        #expect(usage.fromRewards == 2)
        #expect(usage.fromCredits == 0)
        #expect(usage.overageUnits == 0)
        #expect(usage.overageAmount == nil)
        #expect(usage.currency == nil)
        #expect(usage.available == 8)
        #expect(usage.rewards == 0)
        #expect(usage.credits == 0)
        #expect(usage.threshold == 10)
        #expect(usage.revision == nil)
    }

    @Test("A closed period with an unlimited allowance, a credit, a transfer and an unknown type decode")
    func otherPayloads() throws {
        let verifier = try WebhookVerifier(secrets: [Self.vectorSecret])

        let closed = try decodeEvent(
            verifier, type: "usage.period_closed",
            extra: """
                "usage": {"meter": "minutes", "unit": "minute", "period_start": "2026-03-01T00:00:00Z", \
                "period_end": "2026-04-01T00:00:00Z", "allowance": null, "used": 1200, "from_allowance": 1000, \
                "from_rewards": 0, "from_credits": 150, "overage_units": 50, "overage_amount": "1.50", \
                "currency": "EUR", "available": null, "rewards": null, "credits": null, "threshold": null, \
                "revision": 2}
                """
        )
        #expect(closed.type == .usagePeriodClosed)
        let usage = try #require(closed.usage)
        #expect(usage.allowance == .unlimited)
        #expect(usage.overageUnits == 50)
        #expect(usage.overageAmount == "1.50")
        #expect(usage.currency == "EUR")
        #expect(usage.available == nil)
        #expect(usage.revision == 2)

        let granted = try decodeEvent(
            verifier, type: "credits.granted",
            extra: """
                "credit": {"meter": "minutes", "units": 60, "source": "adjustment", "transaction_id": null, \
                "entry_id": "adjustment:goodwill-1", "actor": "ops@example.com", "reason": "goodwill"}
                """
        )
        #expect(granted.type == .creditsGranted)
        #expect(
            granted.credit
                == WebhookCredit(
                    meter: "minutes", units: 60, source: "adjustment", transactionID: nil,
                    entryID: "adjustment:goodwill-1", actor: "ops@example.com", reason: "goodwill"))

        let transferred = try decodeEvent(
            verifier, type: "entitlement.transferred",
            extra: """
                "transfer": {"original_transaction_id": "2000000100", "from_account_id": "acct_1", \
                "to_account_id": "acct_42"}
                """
        )
        #expect(transferred.type == .transferred)
        #expect(
            transferred.transfer
                == WebhookTransfer(originalTransactionID: "2000000100", fromAccountID: "acct_1", toAccountID: "acct_42"))

        let future = try decodeEvent(verifier, type: "account.renamed", extra: nil)
        #expect(future.type == WebhookEventType(rawValue: "account.renamed"))
        #expect(!future.type.isKnown)
    }

    @Test("Encoding a decoded delivery and decoding it again gives the same value")
    func roundTrip() throws {
        let decoder = JSONDecoder()
        let first = try decoder.decode(WebhookDelivery.self, from: Data(Self.entitlementBody.utf8))
        let encoded = try JSONEncoder().encode(first)
        let second = try decoder.decode(WebhookDelivery.self, from: encoded)
        #expect(second == first)
    }

    @Test("A malformed date in a validly signed body is malformedBody")
    func malformedDate() throws {
        let body = Data(
            Self.usageBody.replacingOccurrences(of: "2026-03-10T08:30:00.5Z", with: "yesterday").utf8)
        let headers = try Self.headers(id: Self.usageEventID, body: body, secrets: [Self.vectorSecret])
        let verifier = try WebhookVerifier(secrets: [Self.vectorSecret])
        let error = #expect(throws: WebhookVerificationError.self) {
            try verifier.verify(body: body, headers: headers, now: Self.now)
        }
        guard case .malformedBody(let reason) = error else {
            Issue.record("expected malformedBody, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("occurred_at"))
    }

    // MARK: Refusals

    @Test("A tampered body has no matching signature")
    func tamperedBody() throws {
        let body = Data(Self.entitlementBody.utf8)
        let headers = try Self.headers(id: Self.entitlementEventID, body: body, secrets: [Self.vectorSecret])
        let tampered = Data(Self.entitlementBody.replacingOccurrences(of: #""sequence": 7"#, with: #""sequence": 8"#).utf8)
        #expect(tampered != body)
        let verifier = try WebhookVerifier(secrets: [Self.vectorSecret])
        #expect(throws: WebhookVerificationError.noMatchingSignature) {
            try verifier.verify(body: tampered, headers: headers, now: Self.now)
        }
    }

    @Test("A tampered id or timestamp has no matching signature")
    func tamperedHeaders() throws {
        let body = Data(Self.entitlementBody.utf8)
        let headers = try Self.headers(id: Self.entitlementEventID, body: body, secrets: [Self.vectorSecret])
        let verifier = try WebhookVerifier(secrets: [Self.vectorSecret])
        var otherID = headers
        otherID["webhook-id"] = "00000000-0000-4000-8000-000000000000"
        #expect(throws: WebhookVerificationError.noMatchingSignature) {
            try verifier.verify(body: body, headers: otherID, now: Self.now)
        }
        var otherTime = headers
        otherTime["webhook-timestamp"] = String(Self.attempt + 1)
        #expect(throws: WebhookVerificationError.noMatchingSignature) {
            try verifier.verify(body: body, headers: otherTime, now: Self.now)
        }
    }

    @Test("A signature made with another secret does not match")
    func wrongSecret() throws {
        let body = Data(Self.entitlementBody.utf8)
        let headers = try Self.headers(id: Self.entitlementEventID, body: body, secrets: [Self.newSecret])
        let verifier = try WebhookVerifier(secrets: [Self.vectorSecret])
        #expect(throws: WebhookVerificationError.noMatchingSignature) {
            try verifier.verify(body: body, headers: headers, now: Self.now)
        }
    }

    @Test("Signatures of other versions or not base64 are ignored")
    func otherVersions() throws {
        let body = Data(Self.entitlementBody.utf8)
        let secret = try WebhookSecret(Self.vectorSecret)
        let valid = WebhookVerifier.signature(id: Self.entitlementEventID, timestamp: Self.attempt, body: body, secret: secret)
        let bytes = String(valid.dropFirst(3))
        let verifier = try WebhookVerifier(secrets: [Self.vectorSecret])
        var headers = try Self.headers(id: Self.entitlementEventID, body: body, secrets: [Self.vectorSecret])

        headers["webhook-signature"] = "v2,\(bytes) v1a,\(bytes) v1,@@@ \(bytes)"
        #expect(throws: WebhookVerificationError.noMatchingSignature) {
            try verifier.verify(body: body, headers: headers, now: Self.now)
        }
        headers["webhook-signature"] = "v2,\(bytes)  v1,@@@   \(valid)"
        let delivery = try verifier.verify(body: body, headers: headers, now: Self.now)
        #expect(delivery.event.sequence == 7)
    }

    @Test("A stale timestamp is out of tolerance")
    func staleTimestamp() throws {
        let body = Data(Self.entitlementBody.utf8)
        let headers = try Self.headers(id: Self.entitlementEventID, body: body, secrets: [Self.vectorSecret])
        let verifier = try WebhookVerifier(secrets: [Self.vectorSecret])
        let attempt = Double(Self.attempt)
        // At the edge of the tolerance: accepted.
        _ = try verifier.verify(body: body, headers: headers, now: Date(timeIntervalSince1970: attempt + 300))
        #expect(throws: WebhookVerificationError.timestampOutOfTolerance(seconds: 301)) {
            try verifier.verify(body: body, headers: headers, now: Date(timeIntervalSince1970: attempt + 301))
        }
        #expect(throws: WebhookVerificationError.timestampOutOfTolerance(seconds: 86_400)) {
            try verifier.verify(body: body, headers: headers, now: Date(timeIntervalSince1970: attempt + 86_400))
        }
    }

    @Test("A future timestamp is out of tolerance")
    func futureTimestamp() throws {
        let body = Data(Self.entitlementBody.utf8)
        let headers = try Self.headers(id: Self.entitlementEventID, body: body, secrets: [Self.vectorSecret])
        let verifier = try WebhookVerifier(secrets: [Self.vectorSecret], tolerance: 60)
        let attempt = Double(Self.attempt)
        _ = try verifier.verify(body: body, headers: headers, now: Date(timeIntervalSince1970: attempt - 60))
        #expect(throws: WebhookVerificationError.timestampOutOfTolerance(seconds: -61)) {
            try verifier.verify(body: body, headers: headers, now: Date(timeIntervalSince1970: attempt - 61))
        }
    }

    @Test("A timestamp that is not whole Unix seconds is invalid", arguments: ["12a", "-5", "1.5", "+1772366410", "0x10"])
    func invalidTimestamp(text: String) throws {
        let body = Data(Self.entitlementBody.utf8)
        var headers = try Self.headers(id: Self.entitlementEventID, body: body, secrets: [Self.vectorSecret])
        headers["webhook-timestamp"] = text
        let verifier = try WebhookVerifier(secrets: [Self.vectorSecret])
        #expect(throws: WebhookVerificationError.invalidTimestamp) {
            try verifier.verify(body: body, headers: headers, now: Self.now)
        }
    }

    @Test("A missing or empty header is reported by name", arguments: ["webhook-id", "webhook-timestamp", "webhook-signature"])
    func missingHeader(name: String) throws {
        let body = Data(Self.entitlementBody.utf8)
        let verifier = try WebhookVerifier(secrets: [Self.vectorSecret])
        var headers = try Self.headers(id: Self.entitlementEventID, body: body, secrets: [Self.vectorSecret])
        headers[name] = nil
        #expect(throws: WebhookVerificationError.missingHeader(name)) {
            try verifier.verify(body: body, headers: headers, now: Self.now)
        }
        headers[name] = "  "
        #expect(throws: WebhookVerificationError.missingHeader(name)) {
            try verifier.verify(body: body, headers: headers, now: Self.now)
        }
    }

    // MARK: Rotation and headers

    @Test("During a rotation, a verifier with only the new (or only the old) secret accepts")
    func rotation() throws {
        let body = Data(Self.entitlementBody.utf8)
        let headers = try Self.headers(
            id: Self.entitlementEventID, body: body, secrets: [Self.vectorSecret, Self.newSecret])
        let signatures = try #require(headers["webhook-signature"])
        #expect(signatures.split(separator: " ").count == 2)

        let newOnly = try WebhookVerifier(secrets: [Self.newSecret])
        #expect(try newOnly.verify(body: body, headers: headers, now: Self.now).event.sequence == 7)
        let oldOnly = try WebhookVerifier(secrets: [Self.vectorSecret])
        #expect(try oldOnly.verify(body: body, headers: headers, now: Self.now).event.sequence == 7)

        // And a verifier configured with both accepts a delivery signed with either.
        let both = try WebhookVerifier(secrets: [Self.vectorSecret, Self.newSecret])
        let newSigned = try Self.headers(id: Self.entitlementEventID, body: body, secrets: [Self.newSecret])
        #expect(try both.verify(body: body, headers: newSigned, now: Self.now).id == Self.entitlementEventID)
    }

    @Test("Header names are matched case-insensitively")
    func headerCase() throws {
        let body = Data(Self.entitlementBody.utf8)
        let headers = try Self.headers(id: Self.entitlementEventID, body: body, secrets: [Self.vectorSecret])
        let id = try #require(headers["webhook-id"])
        let timestamp = try #require(headers["webhook-timestamp"])
        let signature = try #require(headers["webhook-signature"])
        let mixed = [
            "Webhook-Id": id,
            "WEBHOOK-TIMESTAMP": timestamp,
            "Webhook-Signature": signature,
            "Content-Type": "application/json",
        ]
        let verifier = try WebhookVerifier(secrets: [Self.vectorSecret])
        let delivery = try verifier.verify(body: body, headers: mixed, now: Self.now)
        #expect(delivery.id == Self.entitlementEventID)
    }

    // MARK: Secrets

    @Test("Malformed secrets are refused")
    func badSecrets() {
        #expect(throws: WebhookSecret.ParseError.missingPrefix) {
            try WebhookSecret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        }
        #expect(throws: WebhookSecret.ParseError.missingPrefix) {
            try WebhookSecret("whsk_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        }
        #expect(throws: WebhookSecret.ParseError.emptyKey) {
            try WebhookSecret("whsec_")
        }
        #expect(throws: WebhookSecret.ParseError.emptyKey) {
            try WebhookSecret("  whsec_ \n")
        }
        #expect(throws: WebhookSecret.ParseError.invalidBase64) {
            try WebhookSecret("whsec_!!!not-base64")
        }
        #expect(throws: WebhookSecret.ParseError.missingPrefix) {
            try WebhookVerifier(secrets: [Self.vectorSecret, "plain"])
        }
        #expect(throws: WebhookSecret.ParseError.noSecrets) {
            try WebhookVerifier(secrets: [])
        }
    }

    @Test("Surrounding white space of a secret is ignored")
    func secretWhiteSpace() throws {
        let body = Data(#"{"test": 2432232314}"#.utf8)
        let secret = try WebhookSecret("  \(Self.vectorSecret)\n")
        let signature = WebhookVerifier.signature(
            id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330, body: body, secret: secret)
        #expect(signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
    }

    @Test("A secret's description never contains the key")
    func secretDescription() throws {
        let secret = try WebhookSecret(Self.vectorSecret)
        let key = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
        #expect(secret.description == "whsec_…(redacted)")
        #expect(!String(describing: secret).contains(key))
        #expect(!String(reflecting: secret).contains(key))
        #expect(!"\(secret)".contains(key))
        var dumped = ""
        dump(secret, to: &dumped)
        #expect(!dumped.contains(key))
        #expect(dumped.contains("redacted"))
        for error in [WebhookSecret.ParseError.missingPrefix, .invalidBase64, .emptyKey, .noSecrets] {
            #expect(!error.description.contains(key))
        }
    }

    @Test("Error descriptions say what is wrong")
    func errorDescriptions() {
        #expect(WebhookVerificationError.missingHeader("webhook-id").description.contains("webhook-id"))
        #expect(WebhookVerificationError.timestampOutOfTolerance(seconds: 301).description.contains("301 s old"))
        #expect(WebhookVerificationError.timestampOutOfTolerance(seconds: -61).description.contains("61 s in the future"))
        #expect(WebhookVerificationError.malformedBody("missing key 'data'").description.contains("missing key 'data'"))
    }

    // MARK: Helpers

    /// The headers subsync would send for `body`, signed with each of `secrets`.
    static func headers(id: String, body: Data, secrets: [String]) throws -> [String: String] {
        var signatures: [String] = []
        for text in secrets {
            let secret = try WebhookSecret(text)
            signatures.append(WebhookVerifier.signature(id: id, timestamp: attempt, body: body, secret: secret))
        }
        return [
            "webhook-id": id,
            "webhook-timestamp": String(attempt),
            "webhook-signature": signatures.joined(separator: " "),
        ]
    }

    /// Signs and verifies a minimal event of `type` with `extra` members in `data`.
    private func decodeEvent(_ verifier: WebhookVerifier, type: String, extra: String?) throws -> WebhookEvent {
        let id = "3f1c9a52-7d7e-4f4a-a0a6-6f4e2b1d9c01"
        let members = extra.map { ", " + $0 } ?? ""
        let text = """
            {"type": "\(type)", "timestamp": "2026-03-10T08:30:00Z", "data": {"id": "\(id)", \
            "account_id": "acct_42", "sequence": 9, "type": "\(type)", "occurred_at": "2026-03-10T08:30:00Z", \
            "entitlement_id": null, "previous": null, "current": null, "previous_tier": null, \
            "state": {"tier": "free", "features": [], "limits": {}, "ads": true, "entitlements": [], \
            "next_transition_at": null}\(members)}}
            """
        let body = Data(text.utf8)
        let headers = try Self.headers(id: id, body: body, secrets: [Self.vectorSecret])
        return try verifier.verify(body: body, headers: headers, now: Self.now).event
    }

    static let entitlementEventID = "8f5d2c1e-4b7a-4c3d-9e2f-1a2b3c4d5e6f"
    static let usageEventID = "0c6f7d5e-2a1b-4c3d-8e9f-0a1b2c3d4e5f"

    /// An `entitlement.activated` delivery as subsync sends it (with spaces and newlines, which
    /// the signature covers like any other byte).
    static let entitlementBody = #"""
        {"type": "entitlement.activated", "timestamp": "2026-03-01T12:00:00.123456Z", "data": {
          "id": "8f5d2c1e-4b7a-4c3d-9e2f-1a2b3c4d5e6f",
          "account_id": "acct_42",
          "sequence": 7,
          "type": "entitlement.activated",
          "occurred_at": "2026-03-01T12:00:00.123456Z",
          "entitlement_id": "pro",
          "previous": null,
          "current": {"id": "pro", "tier": "pro", "status": "active", "is_active": true,
            "product_id": "com.example.pro.monthly", "product_kind": "auto_renewable",
            "source_transaction_id": "2000000123", "original_transaction_id": "2000000100",
            "purchased_at": "2026-03-01T11:59:58Z", "expires_at": "2026-04-01T12:00:00Z",
            "period_ends_at": "2026-04-01T12:00:00.000000Z", "grace_period_expires_at": null,
            "will_renew": true, "revoked_at": null, "revocation_reason": null},
          "previous_tier": "free",
          "state": {
            "tier": "pro",
            "features": ["export", "sync"],
            "limits": {"devices": 5, "monthly_minutes": null},
            "ads": false,
            "entitlements": [
              {"id": "basic", "tier": "basic", "status": "revoked",
                "product_id": "com.example.basic.pass", "product_kind": "non_renewing",
                "source_transaction_id": "1000000001", "original_transaction_id": "1000000001",
                "purchased_at": "2026-01-01T00:00:00Z", "expires_at": null, "period_ends_at": null,
                "grace_period_expires_at": "2026-01-15T09:00:00Z", "will_renew": false,
                "revoked_at": "2026-02-20T10:15:00.5Z", "revocation_reason": "developer_issue"},
              {"id": "pro", "tier": "pro", "status": "active",
                "product_id": "com.example.pro.monthly", "product_kind": "auto_renewable",
                "source_transaction_id": "2000000123", "original_transaction_id": "2000000100",
                "purchased_at": "2026-03-01T11:59:58Z", "expires_at": "2026-04-01T12:00:00Z",
                "period_ends_at": "2026-04-01T12:00:00Z", "grace_period_expires_at": null,
                "will_renew": true, "revoked_at": null, "revocation_reason": null}
            ],
            "next_transition_at": "2026-04-01T12:00:00+00:00"
          }
        }}
        """#

    /// A `usage.low` delivery as subsync sends it.
    static let usageBody = """
        {"type":"usage.low","timestamp":"2026-03-10T08:30:00Z","data":{"id":"0c6f7d5e-2a1b-4c3d-8e9f-0a1b2c3d4e5f",\
        "account_id":"acct_42","sequence":8,"type":"usage.low","occurred_at":"2026-03-10T08:30:00.5Z",\
        "entitlement_id":null,"previous":null,"current":null,"previous_tier":null,\
        "state":{"tier":"free","features":[],"limits":{"monthly_minutes":100},"ads":true,"entitlements":[],\
        "next_transition_at":null},\
        "usage":{"meter":"minutes","unit":"minute","period_start":"2026-03-01T00:00:00Z",\
        "period_end":"2026-04-01T00:00:00Z","allowance":100,"used":92,"from_allowance":90,"from_rewards":2,\
        "from_credits":0,"overage_units":0,"overage_amount":null,"currency":null,"available":8,"rewards":0,\
        "credits":0,"threshold":10,"revision":null}}}
        """
}

/// Whether `date` is within a microsecond of `seconds` since 1970.
private func isClose(_ date: Date?, _ seconds: Double) -> Bool {
    guard let date else { return false }
    return abs(date.timeIntervalSince1970 - seconds) < 1e-6
}
