import Foundation
import SyncCore
import Testing

/// `Report.joinFacts`, what store reports are named by (docs/STORE.md): every field the
/// per-transaction join reads changes the facts, and every field of a report is either among them
/// or named here as left out, so a field added to ``Report`` fails this until it is placed.
@Suite struct JoinFactsTests {
    static let purchased = Date(timeIntervalSince1970: 1_750_000_000)

    /// A verified store report that states something of most fields (revoked, so that its
    /// revocation reason counts).
    static var base: Report {
        Report(
            reportID: "store:t2", deviceID: "app-store", observedAt: purchased.addingTimeInterval(60), productID: ProductID.basicMonthly,
            originalTransactionID: "t1", transactionID: "t2", purchasedAt: purchased,
            expiresAt: purchased.addingTimeInterval(30 * 86_400), gracePeriodExpiresAt: nil, revokedAt: purchased.addingTimeInterval(86_400), revocationReason: .other,
            isUpgraded: false, willAutoRenew: true, inBillingRetry: false, environment: .production, signedTransaction: "a.b.c",
            renewal: RenewalDetails(renewalProductID: ProductID.basicMonthly, renewalDate: purchased.addingTimeInterval(30 * 86_400), signedAt: purchased),
            trust: .verified(signedDate: purchased.addingTimeInterval(60), source: .store))
    }

    /// One change of each field the join reads.
    static let read: [(field: String, change: @Sendable (inout Report) -> Void)] = [
        ("productID", { $0.productID = ProductID.premiumMonthly }),
        ("originalTransactionID", { $0.originalTransactionID = "t0" }),
        ("transactionID", { $0.transactionID = "t3" }),
        ("purchasedAt", { $0.purchasedAt.addTimeInterval(1) }),
        ("expiresAt", { $0.expiresAt = $0.expiresAt?.addingTimeInterval(1) }),
        ("gracePeriodExpiresAt", { $0.gracePeriodExpiresAt = JoinFactsTests.purchased.addingTimeInterval(31 * 86_400) }),
        ("revokedAt", { $0.revokedAt = nil }),
        ("revocationReason", { $0.revocationReason = .developerIssue }),
        ("isUpgraded", { $0.isUpgraded = true }),
        ("willAutoRenew", { $0.willAutoRenew = false }),
        ("inBillingRetry", { $0.inBillingRetry = true }),
        ("environment", { $0.environment = .sandbox }),
        ("renewal", { $0.renewal = nil }),
        ("renewal.expirationReason", { $0.renewal?.expirationReason = .cancelled }),
        ("renewal.renewalProductID", { $0.renewal?.renewalProductID = ProductID.premiumMonthly }),
        ("renewal.priceIncreaseStatus", { $0.renewal?.priceIncreaseStatus = .pending }),
        ("renewal.renewalDate", { $0.renewal?.renewalDate = JoinFactsTests.purchased.addingTimeInterval(31 * 86_400) }),
    ]

    /// What the facts leave out: the report's key and origin, and the JWS text.
    static let leftOut: [(field: String, change: @Sendable (inout Report) -> Void)] = [
        ("reportID", { $0.reportID = "store:t2.1" }),
        ("deviceID", { $0.deviceID = "phone" }),
        ("observedAt", { $0.observedAt.addTimeInterval(60) }),
        ("signedTransaction", { $0.signedTransaction = "d.e.f" }),
        ("trust", { $0.trust = .verified(signedDate: JoinFactsTests.purchased.addingTimeInterval(120), source: .store) }),
        ("renewal.signedAt", { $0.renewal?.signedAt = JoinFactsTests.purchased.addingTimeInterval(120) }),
    ]

    @Test func everyFieldTheJoinReadsChangesTheFacts() {
        let base = Self.base
        for (field, change) in Self.read {
            var changed = base
            change(&changed)
            // The join does read it (the change shows in the aggregate)...
            #expect(TransactionAggregate(changed) != TransactionAggregate(base), "\(field)")
            // ...so the facts must show it too.
            #expect(changed.joinFacts != base.joinFacts, "\(field) is not in joinFacts")
        }
        // Renewal info whose details are all unknown is not the same as none.
        var empty = base
        empty.renewal = RenewalDetails(signedAt: Self.purchased)
        var none = base
        none.renewal = nil
        #expect(empty.joinFacts != none.joinFacts)
    }

    @Test func whatIsLeftOutDoesNotChangeThem() {
        for (field, change) in Self.leftOut {
            var changed = Self.base
            change(&changed)
            #expect(changed.joinFacts == Self.base.joinFacts, "\(field)")
        }
    }

    @Test func everyFieldOfAReportIsPlaced() {
        let placed = Set((Self.read + Self.leftOut).map { $0.field.split(separator: ".").first.map(String.init) ?? $0.field })
        let fields = Set(Mirror(reflecting: Self.base).children.compactMap(\.label))
        #expect(fields == placed, "place these in JoinFactsTests and, if the join reads them, in Report.joinFacts: \(fields.symmetricDifference(placed))")
        let renewalPlaced = Set((Self.read + Self.leftOut).compactMap { entry in
            entry.field.hasPrefix("renewal.") ? String(entry.field.dropFirst("renewal.".count)) : nil
        })
        let renewalFields = Set(Mirror(reflecting: RenewalDetails()).children.compactMap(\.label))
        #expect(renewalFields == renewalPlaced, "\(renewalFields.symmetricDifference(renewalPlaced))")
    }
}
