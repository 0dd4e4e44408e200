import Foundation
import SyncCore
import Testing

/// Wire format: snake_case keys (explicit, so any encoder agrees) and caller-formatted dates.
@Suite struct ModelCodingTests {
    @Test func reportDecodesFromDeviceJSON() throws {
        let json = #"""
            {"report_id": "6F9619FF-8B86-D011-B42D-00C04FC964FF", "device_id": "iphone-15",
             "observed_at": "2025-01-02T03:04:05.678Z", "product_id": "voip.basic.monthly",
             "original_transaction_id": "2000000111", "transaction_id": "2000000222",
             "purchased_at": "2025-01-01T00:00:00Z", "expires_at": "2025-02-01T00:00:00.000Z",
             "will_auto_renew": true, "environment": "Production", "revocation_reason": 1,
             "is_verified": true, "source": "admin"}
            """#
        let report = try WireJSON.decoder.decode(Report.self, from: Data(json.utf8))
        #expect(report.reportID == "6F9619FF-8B86-D011-B42D-00C04FC964FF")
        #expect(report.observedAt == utc(2025, 1, 2, 3, 4).addingTimeInterval(5.678))
        #expect(report.expiresAt == utc(2025, 2, 1))
        #expect(report.isUpgraded == false)  // absent = false
        #expect(report.inBillingRetry == false)
        #expect(report.environment == .production)  // StoreKit's capitalised spelling accepted
        #expect(report.revocationReason == .developerIssue)  // StoreKit's numeric code accepted
        // A device cannot claim trust: those keys are not part of the wire format.
        #expect(report.trust == .unverifiedDevice)
        #expect(report.validationErrors().isEmpty)
    }

    @Test func reportEncodesSnakeCaseAndRoundTrips() throws {
        let original = report(
            "r1", transaction: "t1", product: ProductID.basicMonthly, purchased: utc(2025, 1, 1),
            expires: utc(2025, 2, 1), grace: utc(2025, 2, 8), revoked: utc(2025, 1, 20), reason: .other,
            upgraded: true, billingRetry: true, observed: utc(2025, 1, 2).addingTimeInterval(0.25))
        let data = try WireJSON.encoder.encode(original)
        // Every wire field (docs/RESOLUTION.md, "Reports and trust") except the absent signed_transaction.
        #expect(
            try WireJSON.keys(of: data) == [
                "report_id", "device_id", "observed_at", "product_id", "original_transaction_id", "transaction_id",
                "purchased_at", "expires_at", "grace_period_expires_at", "revoked_at", "revocation_reason",
                "is_upgraded", "will_auto_renew", "in_billing_retry", "environment",
            ])
        let object = try WireJSON.object(data)
        #expect(object["observed_at"] as? String == "2025-01-02T00:00:00.250Z")
        #expect(object["revocation_reason"] as? String == "other")
        #expect(try WireJSON.decoder.decode(Report.self, from: data) == original)
        // The default encoder works too and gives the same keys.
        #expect(try WireJSON.keys(of: JSONEncoder().encode(original)) == WireJSON.keys(of: data))
    }

    @Test func resolvedStateRoundTripsWithExplicitNulls() throws {
        let lifetime = report(
            "a", transaction: "t1", product: ProductID.premiumLifetime, purchased: utc(2025, 1, 1), autoRenew: nil,
            observed: utc(2025, 1, 1))
        let state = resolve([lifetime], at: utc(2025, 1, 2))
        let data = try WireJSON.encoder.encode(state)
        #expect(try WireJSON.keys(of: data) == ["tier", "features", "limits", "ads", "entitlements", "next_transition_at"])
        let object = try WireJSON.object(data)
        #expect(object["next_transition_at"] is NSNull)
        let limits = try #require(object["limits"] as? [String: Any])
        #expect(limits["monthly_minutes"] is NSNull)  // unlimited
        let entitlements = try #require(object["entitlements"] as? [[String: Any]])
        let premium = try #require(entitlements.first)
        #expect(
            Set(premium.keys) == [
                "id", "tier", "status", "is_active", "product_id", "product_kind", "source_transaction_id",
                "original_transaction_id", "purchased_at", "expires_at", "period_ends_at", "grace_period_expires_at",
                "will_renew", "revoked_at", "revocation_reason", "expiration_reason", "renewal_product_id",
                "price_increase_status", "renewal_date",
            ])
        #expect(premium["expires_at"] is NSNull)  // lifetime
        #expect(premium["expiration_reason"] is NSNull)  // no renewal info for a lifetime purchase
        #expect(premium["is_active"] as? Bool == true)
        #expect(premium["status"] as? String == "active")
        #expect(premium["product_kind"] as? String == "non_consumable")
        #expect(try WireJSON.decoder.decode(AccountState.self, from: data) == state)
    }

    @Test func eventRoundTrips() throws {
        let purchase = report(
            "a", transaction: "t1", product: ProductID.premiumMonthly, purchased: utc(2025, 1, 1),
            expires: utc(2025, 2, 1), grace: utc(2025, 2, 10), billingRetry: true, observed: utc(2025, 1, 1))
        let before = resolve([purchase], at: utc(2025, 1, 20))
        let after = resolve([purchase], at: utc(2025, 2, 2))
        let drafts = EventDeriver.events(previous: before, current: after, now: utc(2025, 2, 2))
        let draft = try #require(drafts.first)
        #expect(draft.type == .gracePeriodStarted)
        let event = Event(draft: draft, id: "evt_1", accountID: "acct_1", sequence: 7, occurredAt: utc(2025, 2, 2))
        let data = try WireJSON.encoder.encode(event)
        #expect(
            try WireJSON.keys(of: data) == [
                "id", "account_id", "sequence", "type", "occurred_at", "entitlement_id", "previous", "current",
                "previous_tier", "state",
            ])
        let object = try WireJSON.object(data)
        #expect(object["type"] as? String == "entitlement.grace_period_started")
        #expect(object["account_id"] as? String == "acct_1")
        #expect(object["previous_tier"] is NSNull)
        #expect(try WireJSON.decoder.decode(Event.self, from: data) == event)
    }

    @Test func eventTypeRawValuesMatchTheDesign() {
        #expect(
            Set(EventType.allCases.map(\.rawValue)) == [
                "entitlement.activated", "entitlement.renewed", "entitlement.expired", "entitlement.revoked",
                "entitlement.restored", "entitlement.product_changed", "entitlement.grace_period_started",
                "entitlement.billing_issue", "entitlement.renewal_changed", "account.tier_changed",
                "entitlement.transferred", "entitlement.updated", "credits.granted", "credits.revoked",
                "usage.low", "usage.exhausted", "usage.period_closed",
            ])
    }

    @Test func aggregateRoundTrips() throws {
        let reports = [
            report(
                "a", transaction: "t1", product: ProductID.basicMonthly, purchased: utc(2025, 1, 1),
                expires: utc(2025, 2, 1), revoked: utc(2025, 1, 3), reason: .developerIssue, observed: utc(2025, 1, 3)),
            report(
                "b", transaction: "t1", product: ProductID.basicMonthly, purchased: utc(2025, 1, 1),
                expires: utc(2025, 2, 1), observed: utc(2025, 1, 5), trust: .verified(signedDate: utc(2025, 1, 5))),
        ]
        let aggregate = try #require(TransactionAggregate.aggregate(reports).first)
        #expect(!aggregate.isRevoked)
        let data = try WireJSON.encoder.encode(aggregate)
        let keys = try WireJSON.keys(of: data)
        #expect(keys.isSuperset(of: ["transaction_id", "expires_at", "latest_reinstated_at", "is_upgraded", "representative"]))
        #expect(keys.allSatisfy { $0 == $0.lowercased() })
        #expect(try WireJSON.decoder.decode(TransactionAggregate.self, from: data) == aggregate)
    }
}
