import Foundation

extension TransactionAggregate {
    /// Joins another aggregate of the same transaction into this one. Commutative, associative
    /// and idempotent.
    public mutating func join(_ other: TransactionAggregate) {
        if representative < other.representative {
            adoptDescriptiveFields(of: other)
        }
        expiresAt = latest(expiresAt, other.expiresAt)
        gracePeriodExpiresAt = latest(gracePeriodExpiresAt, other.gracePeriodExpiresAt)
        storeRevocation = RevocationMark.latest(storeRevocation, other.storeRevocation)
        storeReinstatedAt = latest(storeReinstatedAt, other.storeReinstatedAt)
        operatorRevocation = RevocationMark.latest(operatorRevocation, other.operatorRevocation)
        operatorReinstatedAt = latest(operatorReinstatedAt, other.operatorReinstatedAt)
        operatorLiftsStoreBefore = latest(operatorLiftsStoreBefore, other.operatorLiftsStoreBefore)
        renewal = RenewalMark.latest(renewal, other.renewal)
        isUpgraded = isUpgraded || other.isUpgraded
        if other.firstObservedAt < firstObservedAt { firstObservedAt = other.firstObservedAt }
        if other.lastObservedAt > lastObservedAt { lastObservedAt = other.lastObservedAt }
    }

    /// Joins one report of the same transaction into this aggregate; equivalent to
    /// `join(TransactionAggregate(report))` without building the intermediate aggregate.
    public mutating func join(_ report: Report) {
        let key = ReportOrderKey(report)
        if representative < key {
            transactionID = report.transactionID
            originalTransactionID = report.originalTransactionID
            productID = report.productID
            purchasedAt = report.purchasedAt
            willAutoRenew = report.willAutoRenew
            inBillingRetry = report.inBillingRetry
            environment = report.environment
            representative = key
        }
        expiresAt = latest(expiresAt, report.expiresAt)
        gracePeriodExpiresAt = latest(gracePeriodExpiresAt, report.gracePeriodExpiresAt)
        storeRevocation = RevocationMark.latest(storeRevocation, Self.storeRevocationMark(of: report, key: key))
        storeReinstatedAt = latest(storeReinstatedAt, Self.storeReinstatementTime(of: report))
        operatorRevocation = RevocationMark.latest(operatorRevocation, Self.operatorRevocationMark(of: report, key: key))
        operatorReinstatedAt = latest(operatorReinstatedAt, Self.operatorReinstatementTime(of: report))
        operatorLiftsStoreBefore = latest(operatorLiftsStoreBefore, Self.operatorStoreLift(of: report))
        if let theirs = RenewalMark(report, key: key) {
            renewal = RenewalMark.latest(renewal, theirs)
        }
        isUpgraded = isUpgraded || report.isUpgraded
        if report.observedAt < firstObservedAt { firstObservedAt = report.observedAt }
        if report.observedAt > lastObservedAt { lastObservedAt = report.observedAt }
    }

    /// The join of `self` and `other`.
    public func joined(with other: TransactionAggregate) -> TransactionAggregate {
        var result = self
        result.join(other)
        return result
    }

    /// Groups `reports` by transaction id and joins each group; the result is sorted by
    /// transaction id. Equivalent to any order of joins over the same reports.
    public static func aggregate(_ reports: some Sequence<Report>) -> [TransactionAggregate] {
        var ledger = TransactionLedger()
        for report in reports { ledger.add(report) }
        return ledger.aggregates
    }

    /// Joins two lists of aggregates transaction by transaction (e.g. the stored aggregates of an
    /// account and those of a new batch); the result is sorted by transaction id.
    public static func merge(
        _ lhs: some Sequence<TransactionAggregate>, _ rhs: some Sequence<TransactionAggregate>
    ) -> [TransactionAggregate] {
        var ledger = TransactionLedger()
        for aggregate in lhs { ledger.add(aggregate) }
        for aggregate in rhs { ledger.add(aggregate) }
        return ledger.aggregates
    }

    // MARK: - Contributions of one report

    /// The store's revocation a report contributes: a device or store report's `revoked_at`.
    static func storeRevocationMark(of report: Report, key: ReportOrderKey) -> RevocationMark? {
        guard report.trust.source != .admin, let revokedAt = report.revokedAt else { return nil }
        return RevocationMark(revokedAt: revokedAt, reason: report.revocationReason, sourceReport: key)
    }

    /// The store's reinstatement a report contributes: a verified device or store report without
    /// `revoked_at`, at its signed date. Unverified reports contribute nothing.
    static func storeReinstatementTime(of report: Report) -> Date? {
        guard report.trust.source != .admin, report.trust.isVerified, report.revokedAt == nil else { return nil }
        return report.trust.signedDate
    }

    /// The operator's revocation an admin `revoke` contributes, at its command time.
    static func operatorRevocationMark(of report: Report, key: ReportOrderKey) -> RevocationMark? {
        guard report.trust.effectiveAdminAction == .revoke else { return nil }
        return RevocationMark(
            revokedAt: report.trust.signedDate ?? report.observedAt, reason: report.revocationReason, sourceReport: key)
    }

    /// The operator's reinstatement an admin `unrevoke` contributes, at its command time.
    static func operatorReinstatementTime(of report: Report) -> Date? {
        guard report.trust.effectiveAdminAction == .unrevoke else { return nil }
        return report.trust.signedDate ?? report.observedAt
    }

    /// The store revocations an admin `unrevoke` lifts: those before just after the one it saw
    /// (its `revoked_at`; the purchase time when it saw none), or for an unrevoke that named none
    /// (recorded before unrevokes did), those before its command time.
    static func operatorStoreLift(of report: Report) -> Date? {
        guard report.trust.effectiveAdminAction == .unrevoke else { return nil }
        if let seen = report.revokedAt { return seen.addingTimeInterval(0.001) }
        return report.trust.signedDate ?? report.observedAt
    }

    private mutating func adoptDescriptiveFields(of other: TransactionAggregate) {
        transactionID = other.transactionID
        originalTransactionID = other.originalTransactionID
        productID = other.productID
        purchasedAt = other.purchasedAt
        willAutoRenew = other.willAutoRenew
        inBillingRetry = other.inBillingRetry
        environment = other.environment
        representative = other.representative
    }
}

/// The later of two optional dates; absent counts as "nothing known", not as "earlier".
func latest(_ a: Date?, _ b: Date?) -> Date? {
    guard let a else { return b }
    guard let b else { return a }
    return a < b ? b : a
}
