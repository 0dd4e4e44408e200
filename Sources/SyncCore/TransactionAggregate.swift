import Foundation

/// Everything known about one transaction of one account, as the join of all of its reports
/// (docs/RESOLUTION.md, "Per transaction: the join"). Every field is a join (max, min, or, or
/// "fields of the greatest report"), so the aggregate of a set of reports does not depend on their
/// order, duplicates or batching:
///
/// - ``expiresAt``, ``gracePeriodExpiresAt``: the latest reported (last-expiry-wins).
/// - ``revocation``: the latest revocation (by time, then by report order key). Device and store
///   reports revoke through `revoked_at`; admin reports only through ``AdminAction/revoke`` at
///   their command time (an admin report's own `revoked_at` is ignored).
/// - ``latestReinstatedAt``: the latest reinstatement: a *verified* report without `revoked_at`
///   contributes its `signed_date` (Apple's REFUND_REVERSED); an admin ``AdminAction/unrevoke``
///   contributes its command time. Unverified reports never contribute, so no stale or forged
///   device report can un-revoke a transaction.
/// - ``isRevoked`` = a revocation exists and no reinstatement is strictly later than it.
/// - ``isUpgraded``: or (sticky).
/// - Descriptive fields (product, original transaction, purchase date, auto-renew, billing retry,
///   environment) come from the ``representative`` report: the greatest by ``ReportOrderKey``.
/// - ``renewal``: the renewal details signed latest (see ``RenewalMark``); signed beat unsigned.
/// - ``firstObservedAt`` / ``lastObservedAt``: min / max of `observed_at` (informational).
///
/// Join only aggregates of the same transaction; the result for different transactions is
/// well-defined (still a join) but meaningless.
public struct TransactionAggregate: Sendable, Hashable, Codable {
    /// The transaction id (the aggregation key with the account).
    public var transactionID: String
    /// From the representative report.
    public var originalTransactionID: String
    /// From the representative report.
    public var productID: String
    /// From the representative report.
    public var purchasedAt: Date
    /// Latest reported `expires_at`.
    public var expiresAt: Date?
    /// Latest reported `grace_period_expires_at`.
    public var gracePeriodExpiresAt: Date?
    /// The latest revocation, if any report revoked the transaction.
    public var revocation: RevocationMark?
    /// The latest reinstatement time (verified refund reversal or admin unrevoke).
    public var latestReinstatedAt: Date?
    /// Sticky: once a report says upgraded, the transaction stays upgraded.
    public var isUpgraded: Bool
    /// From the representative report.
    public var willAutoRenew: Bool?
    /// From the representative report.
    public var inBillingRetry: Bool
    /// From the representative report.
    public var environment: StoreEnvironment?
    /// The order key of the representative report.
    public var representative: ReportOrderKey
    /// Earliest `observed_at` of any report.
    public var firstObservedAt: Date
    /// Latest `observed_at` of any report.
    public var lastObservedAt: Date
    /// The renewal details signed latest among the reports, and the report that carried them.
    public var renewal: RenewalMark?

    /// Every field as given: an aggregate read back from storage.
    public init(
        transactionID: String, originalTransactionID: String, productID: String, purchasedAt: Date, expiresAt: Date?,
        gracePeriodExpiresAt: Date?, revocation: RevocationMark?, latestReinstatedAt: Date?, isUpgraded: Bool,
        willAutoRenew: Bool?, inBillingRetry: Bool, environment: StoreEnvironment?, representative: ReportOrderKey,
        firstObservedAt: Date, lastObservedAt: Date, renewal: RenewalMark? = nil
    ) {
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.purchasedAt = purchasedAt
        self.expiresAt = expiresAt
        self.gracePeriodExpiresAt = gracePeriodExpiresAt
        self.revocation = revocation
        self.latestReinstatedAt = latestReinstatedAt
        self.isUpgraded = isUpgraded
        self.willAutoRenew = willAutoRenew
        self.inBillingRetry = inBillingRetry
        self.environment = environment
        self.representative = representative
        self.firstObservedAt = firstObservedAt
        self.lastObservedAt = lastObservedAt
        self.renewal = renewal
    }

    /// The aggregate of the single report `report`.
    public init(_ report: Report) {
        transactionID = report.transactionID
        originalTransactionID = report.originalTransactionID
        productID = report.productID
        purchasedAt = report.purchasedAt
        expiresAt = report.expiresAt
        gracePeriodExpiresAt = report.gracePeriodExpiresAt
        isUpgraded = report.isUpgraded
        willAutoRenew = report.willAutoRenew
        inBillingRetry = report.inBillingRetry
        environment = report.environment
        representative = ReportOrderKey(report)
        firstObservedAt = report.observedAt
        lastObservedAt = report.observedAt
        revocation = Self.revocationMark(of: report, key: representative)
        latestReinstatedAt = Self.reinstatementTime(of: report)
        renewal = RenewalMark(report, key: representative)
    }

    /// Whether the transaction is revoked: some revocation exists and no reinstatement is later
    /// than the latest one.
    public var isRevoked: Bool {
        guard let revocation else { return false }
        guard let latestReinstatedAt else { return true }
        return latestReinstatedAt <= revocation.revokedAt
    }

    /// The latest revocation time, whether or not it was later reversed.
    public var latestRevokedAt: Date? { revocation?.revokedAt }

    enum CodingKeys: String, CodingKey {
        case transactionID = "transaction_id"
        case originalTransactionID = "original_transaction_id"
        case productID = "product_id"
        case purchasedAt = "purchased_at"
        case expiresAt = "expires_at"
        case gracePeriodExpiresAt = "grace_period_expires_at"
        case revocation
        case latestReinstatedAt = "latest_reinstated_at"
        case isUpgraded = "is_upgraded"
        case willAutoRenew = "will_auto_renew"
        case inBillingRetry = "in_billing_retry"
        case environment
        case representative
        case firstObservedAt = "first_observed_at"
        case lastObservedAt = "last_observed_at"
        case renewal
    }
}
