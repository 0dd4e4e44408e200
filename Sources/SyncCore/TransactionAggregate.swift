import Foundation

/// Everything known about one transaction of one account, as the join of all of its reports
/// (docs/RESOLUTION.md, "Per transaction: the join"). Every field is a join (max, min, or, or
/// "fields of the greatest report"), so the aggregate of a set of reports does not depend on their
/// order, duplicates or batching:
///
/// - ``expiresAt``, ``gracePeriodExpiresAt``: the latest reported (last-expiry-wins).
/// - Revocations come from two sources, kept apart (docs/RESOLUTION.md, "Revocation: the store's
///   and the operator's"):
///   - the store's: ``storeRevocation``, the latest `revoked_at` of a device or store report (by
///     time, then by report order key), and ``storeReinstatedAt``, the latest `signed_date` of a
///     *verified* device or store report without `revoked_at` (Apple's REFUND_REVERSED).
///     Unverified reports never reinstate, so no stale or forged device report un-revokes.
///   - the operator's: ``operatorRevocation``, the latest ``AdminAction/revoke`` at its command
///     time, ``operatorReinstatedAt``, the latest ``AdminAction/unrevoke``, and
///     ``operatorLiftsStoreBefore``, the latest store revocation an unrevoke saw (an unrevoke's
///     `revoked_at` names it; a revoke's is ignored).
/// - ``isRevoked``: the store's revocation stands (no later store reinstatement, and no unrevoke
///   that saw it) or the operator's stands (no later operator unrevoke). A signed store word can
///   never lift what an operator decided; an operator's unrevoke lifts both.
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
    /// The store's latest revocation (a device or store report's `revoked_at`), reinstated or not.
    public var storeRevocation: RevocationMark?
    /// The store's latest reinstatement: the signed date of a verified report without `revoked_at`.
    public var storeReinstatedAt: Date?
    /// The operator's latest revoke, lifted or not.
    public var operatorRevocation: RevocationMark?
    /// The command time of the operator's latest unrevoke.
    public var operatorReinstatedAt: Date?
    /// Store revocations dated before this are lifted by an operator: just after the latest store
    /// revocation an unrevoke saw, so that a refund made earlier but reported after the unrevoke
    /// still counts (for unrevokes recorded before they named what they saw: their time).
    public var operatorLiftsStoreBefore: Date?
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
        gracePeriodExpiresAt: Date?, storeRevocation: RevocationMark?, storeReinstatedAt: Date?,
        operatorRevocation: RevocationMark? = nil, operatorReinstatedAt: Date? = nil, operatorLiftsStoreBefore: Date? = nil,
        isUpgraded: Bool,
        willAutoRenew: Bool?, inBillingRetry: Bool, environment: StoreEnvironment?, representative: ReportOrderKey,
        firstObservedAt: Date, lastObservedAt: Date, renewal: RenewalMark? = nil
    ) {
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.purchasedAt = purchasedAt
        self.expiresAt = expiresAt
        self.gracePeriodExpiresAt = gracePeriodExpiresAt
        self.storeRevocation = storeRevocation
        self.storeReinstatedAt = storeReinstatedAt
        self.operatorRevocation = operatorRevocation
        self.operatorReinstatedAt = operatorReinstatedAt
        self.operatorLiftsStoreBefore = operatorLiftsStoreBefore
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
        storeRevocation = Self.storeRevocationMark(of: report, key: representative)
        storeReinstatedAt = Self.storeReinstatementTime(of: report)
        operatorRevocation = Self.operatorRevocationMark(of: report, key: representative)
        operatorReinstatedAt = Self.operatorReinstatementTime(of: report)
        operatorLiftsStoreBefore = Self.operatorStoreLift(of: report)
        renewal = RenewalMark(report, key: representative)
    }

    /// Whether the transaction is revoked: the store's revocation or the operator's stands.
    public var isRevoked: Bool { isRevokedByStore || isRevokedByOperator }

    /// Whether the store's revocation stands: the store did not reinstate the transaction after
    /// it, and no operator's unrevoke lifted it (one that saw it, or for an older unrevoke, one
    /// after it).
    public var isRevokedByStore: Bool {
        guard let storeRevocation else { return false }
        let liftedByOperator = operatorLiftsStoreBefore.map { storeRevocation.revokedAt < $0 } ?? false
        return !Self.lifts(storeReinstatedAt, storeRevocation) && !liftedByOperator
    }

    /// Whether the operator's revocation stands: no operator unrevoke is later. Nothing the store
    /// or a device signs lifts it.
    public var isRevokedByOperator: Bool {
        guard let operatorRevocation else { return false }
        return !Self.lifts(operatorReinstatedAt, operatorRevocation)
    }

    /// Whether the store's own word is "revoked": its revocation against its own reinstatements,
    /// whatever an operator decided (what reconciling against the store compares).
    public var storeSaysRevoked: Bool {
        guard let storeRevocation else { return false }
        return !Self.lifts(storeReinstatedAt, storeRevocation)
    }

    /// The revocation in force, the later of the two sources' when both stand; `nil` when not
    /// revoked. Its time and reason are what the resolved state shows.
    public var revocationInForce: RevocationMark? {
        let byStore = isRevokedByStore ? storeRevocation : nil
        let byOperator = isRevokedByOperator ? operatorRevocation : nil
        guard let byStore else { return byOperator }
        guard let byOperator else { return byStore }
        return byOperator.isAfter(byStore) ? byOperator : byStore
    }

    /// The latest revocation time of either source, whether or not it was later lifted.
    public var latestRevokedAt: Date? { latest(storeRevocation?.revokedAt, operatorRevocation?.revokedAt) }

    /// The latest reinstatement time of either source.
    public var latestReinstatedAt: Date? { latest(storeReinstatedAt, operatorReinstatedAt) }

    /// Whether a reinstatement at `reinstatedAt` lifts `revocation` (strictly later only).
    private static func lifts(_ reinstatedAt: Date?, _ revocation: RevocationMark) -> Bool {
        guard let reinstatedAt else { return false }
        return reinstatedAt > revocation.revokedAt
    }

    /// Decodes a stored aggregate; one stored before unrevokes named the store revocation they saw
    /// lifts the store's revocations before its latest unrevoke, as it did then.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let operatorReinstatedAt = try c.decodeIfPresent(Date.self, forKey: .operatorReinstatedAt)
        self.init(
            transactionID: try c.decode(String.self, forKey: .transactionID),
            originalTransactionID: try c.decode(String.self, forKey: .originalTransactionID),
            productID: try c.decode(String.self, forKey: .productID), purchasedAt: try c.decode(Date.self, forKey: .purchasedAt),
            expiresAt: try c.decodeIfPresent(Date.self, forKey: .expiresAt),
            gracePeriodExpiresAt: try c.decodeIfPresent(Date.self, forKey: .gracePeriodExpiresAt),
            storeRevocation: try c.decodeIfPresent(RevocationMark.self, forKey: .storeRevocation),
            storeReinstatedAt: try c.decodeIfPresent(Date.self, forKey: .storeReinstatedAt),
            operatorRevocation: try c.decodeIfPresent(RevocationMark.self, forKey: .operatorRevocation),
            operatorReinstatedAt: operatorReinstatedAt,
            operatorLiftsStoreBefore: c.contains(.operatorLiftsStoreBefore)
                ? try c.decodeIfPresent(Date.self, forKey: .operatorLiftsStoreBefore) : operatorReinstatedAt,
            isUpgraded: try c.decode(Bool.self, forKey: .isUpgraded),
            willAutoRenew: try c.decodeIfPresent(Bool.self, forKey: .willAutoRenew),
            inBillingRetry: try c.decode(Bool.self, forKey: .inBillingRetry),
            environment: try c.decodeIfPresent(StoreEnvironment.self, forKey: .environment),
            representative: try c.decode(ReportOrderKey.self, forKey: .representative),
            firstObservedAt: try c.decode(Date.self, forKey: .firstObservedAt),
            lastObservedAt: try c.decode(Date.self, forKey: .lastObservedAt),
            renewal: try c.decodeIfPresent(RenewalMark.self, forKey: .renewal))
    }

    enum CodingKeys: String, CodingKey {
        case transactionID = "transaction_id"
        case originalTransactionID = "original_transaction_id"
        case productID = "product_id"
        case purchasedAt = "purchased_at"
        case expiresAt = "expires_at"
        case gracePeriodExpiresAt = "grace_period_expires_at"
        case storeRevocation = "revocation"
        case storeReinstatedAt = "latest_reinstated_at"
        case operatorRevocation = "operator_revocation"
        case operatorReinstatedAt = "operator_reinstated_at"
        case operatorLiftsStoreBefore = "operator_lifts_store_before"
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
