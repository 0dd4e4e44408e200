import Foundation

/// Resolves an account's transaction aggregates into its ``AccountState`` at an instant `now`
/// (docs/RESOLUTION.md, "Per entitlement"). Pure: the clock is a parameter, and the result depends
/// only on the *set* of aggregates (not their order).
///
/// Per entitlement of the catalogue:
/// - Its transactions are those whose product the catalogue maps to it. Transactions of unknown
///   products and of consumables are kept by the caller but grant nothing.
/// - **Grants** are its transactions that are neither revoked nor upgraded.
/// - **Access end** of a grant: auto-renewable → max(`expires_at`, `grace_period_expires_at`)
///   (when a report never gave `expires_at`, `purchased_at` + catalogue duration, else
///   `purchased_at`); non-consumable → never; non-renewing → the grants *stack*: sorted by
///   (`purchased_at`, transaction id), `end = max(end, purchased_at) + duration` in the UTC
///   Gregorian calendar; the `expires_at` a device reports for a pass is ignored.
/// - The **source** is the grant with the greatest (access end, `purchased_at`, transaction id);
///   its access end is the entitlement's `expires_at` (last-expiry-wins) and it decides the
///   status (see ``EntitlementStatus``).
/// - When no grant gives access now and the latest transaction (by `purchased_at`, then id) is
///   revoked, the status is `revoked` and that transaction is the source (a refunded renewal
///   reads as `revoked`, not as the `expired` of the period before it). With no grant at all and
///   the latest not revoked (e.g. upgraded away), `expired`. Entitlements without any
///   transaction are not listed.
///
/// An auto-renewable entitlement also carries its subscription's renewal details: those signed
/// latest among all transactions of the source's original transaction (``RenewalMark``), with
/// `renewal_product_id` and `renewal_date` only while the entitlement will renew (they describe a
/// renewal that is coming), and only on the entitlement of the subscription's latest transaction
/// or one still alive (an entitlement upgraded away keeps no live subscription's details). When
/// that renewal info is signed, its auto-renew status and billing retry also decide `will_renew`
/// and `billing_retry` instead of the source transaction's representative report: the renewal
/// info signed latest wins.
///
/// The account's tier is the highest tier among entitlements that grant access (`active` or
/// `grace_period`), else the base tier; features, limits and ads come from that tier.
public enum Resolver {
    /// The resolved state of the account whose transaction aggregates are `transactions`, at `now`.
    /// Expects at most one aggregate per transaction id (a ``TransactionLedger`` guarantees it).
    public static func resolve(
        transactions: [TransactionAggregate], catalogue: Catalogue, now: Date
    ) -> AccountState {
        let nowValue = now.timeIntervalSinceReferenceDate
        var slots = [EntitlementSlot](repeating: EntitlementSlot(), count: catalogue.entitlements.count)
        // Per original transaction of an auto-renewable product: the renewal details signed latest
        // (allocated only when some transaction has any).
        var renewals: [String: RenewalMark] = [:]

        for index in transactions.indices {
            let transaction = transactions[index]
            guard let product = catalogue.products[transaction.productID],
                let entitlementIndex = product.entitlementIndex
            else { continue }
            slots[entitlementIndex].noteTransaction(index, in: transactions)
            if product.kind == .autoRenewable, let renewal = transaction.renewal {
                renewals[transaction.originalTransactionID] = RenewalMark.latest(renewals[transaction.originalTransactionID], renewal)
            }
            if transaction.isRevoked || transaction.isUpgraded { continue }
            switch product.kind {
            case .nonConsumable:
                slots[entitlementIndex].offer(
                    Grant(index: index, kind: .nonConsumable, periodEnd: .infinity, accessEnd: .infinity),
                    in: transactions)
            case .autoRenewable:
                let periodEnd =
                    transaction.expiresAt
                    ?? product.duration?.advance(transaction.purchasedAt)
                    ?? transaction.purchasedAt
                let periodValue = periodEnd.timeIntervalSinceReferenceDate
                let graceValue = transaction.gracePeriodExpiresAt?.timeIntervalSinceReferenceDate ?? -.infinity
                slots[entitlementIndex].offer(
                    Grant(
                        index: index, kind: .autoRenewable, periodEnd: periodValue,
                        accessEnd: max(periodValue, graceValue)),
                    in: transactions)
            case .nonRenewing:
                slots[entitlementIndex].passes.append(PendingPass(index: index, duration: product.duration))
            case .consumable:
                continue  // unreachable: the catalogue refuses consumables with an entitlement
            }
        }

        var entitlementStates: [EntitlementState] = []
        entitlementStates.reserveCapacity(catalogue.entitlements.count)
        var tierRank = 0
        var nextTransition = Double.infinity

        for entitlementIndex in catalogue.entitlementIndicesByID {
            var slot = slots[entitlementIndex]
            guard let latestIndex = slot.latestIndex else { continue }
            if !slot.passes.isEmpty { slot.stackPasses(in: transactions) }
            let entitlement = catalogue.entitlements[entitlementIndex]
            let latest = transactions[latestIndex]
            var state: EntitlementState?
            if let grant = slot.best {
                let granted = entitlementState(
                    entitlement, grant: grant, transactions: transactions, renewals: renewals, now: nowValue)
                // A refund of the latest purchase outranks an older grant that has run out.
                if granted.status.grantsAccess || !latest.isRevoked { state = granted }
                if grant.periodEnd > nowValue { nextTransition = min(nextTransition, grant.periodEnd) }
                if grant.accessEnd > nowValue { nextTransition = min(nextTransition, grant.accessEnd) }
            }
            var resolved = state ?? lapsedEntitlementState(entitlement, latest: latest, catalogue: catalogue)
            if resolved.productKind == .autoRenewable, let renewal = renewals[resolved.originalTransactionID],
                resolved.status.isAlive || isLatest(resolved.sourceTransactionID, of: resolved.originalTransactionID, in: transactions)
            {
                resolved.take(renewal.details)
            }
            if resolved.status.grantsAccess { tierRank = max(tierRank, entitlement.tierRank) }
            entitlementStates.append(resolved)
        }


        let tier = catalogue.tiers[tierRank]
        return AccountState(
            tier: tier.id, features: tier.features, limits: tier.limits, ads: tier.ads,
            entitlements: entitlementStates,
            nextTransitionAt: nextTransition.isFinite ? Date(timeIntervalSinceReferenceDate: nextTransition) : nil)
    }

    /// Resolves a ledger's aggregates.
    public static func resolve(ledger: TransactionLedger, catalogue: Catalogue, now: Date) -> AccountState {
        resolve(transactions: ledger.unorderedAggregates, catalogue: catalogue, now: now)
    }

    /// Joins `reports` per transaction and resolves the result (what `subsync reconcile` does).
    public static func resolve(reports: some Sequence<Report>, catalogue: Catalogue, now: Date) -> AccountState {
        var ledger = TransactionLedger()
        for report in reports { ledger.add(report) }
        return resolve(ledger: ledger, catalogue: catalogue, now: now)
    }

    // MARK: - Building entitlement states

    /// Whether `transactionID` is the latest transaction (by purchase) of the subscription
    /// `original`: a lapsed entitlement shows its subscription's renewal details only then.
    private static func isLatest(_ transactionID: String, of original: String, in transactions: [TransactionAggregate]) -> Bool {
        var latest: TransactionAggregate?
        for transaction in transactions where transaction.originalTransactionID == original {
            if latest.map({ EntitlementSlot.purchasedBefore($0, transaction) }) ?? true { latest = transaction }
        }
        return latest?.transactionID == transactionID
    }

    private static func entitlementState(
        _ entitlement: Entitlement, grant: Grant, transactions: [TransactionAggregate], renewals: [String: RenewalMark],
        now: Double
    ) -> EntitlementState {
        let source = transactions[grant.index]
        // The subscription's renewal info signed latest decides auto-renew and billing retry.
        let signed = grant.kind == .autoRenewable ? renewals[source.originalTransactionID].flatMap { $0.isSigned ? $0 : nil } : nil
        let willAutoRenew = signed?.willAutoRenew ?? source.willAutoRenew
        let inBillingRetry = signed?.inBillingRetry ?? source.inBillingRetry
        let status: EntitlementStatus
        if now < grant.periodEnd {
            status = .active
        } else if now < grant.accessEnd {
            status = .gracePeriod
        } else if grant.kind == .autoRenewable && inBillingRetry {
            status = .billingRetry
        } else {
            status = .expired
        }
        let isLifetime = grant.kind == .nonConsumable
        // A grace end not after the period end belongs to no grace period of this period.
        let grace = source.gracePeriodExpiresAt.flatMap {
            $0.timeIntervalSinceReferenceDate > grant.periodEnd ? $0 : nil
        }
        return EntitlementState(
            id: entitlement.id, tier: entitlement.tierID, status: status, productID: source.productID,
            productKind: grant.kind, sourceTransactionID: source.transactionID,
            originalTransactionID: source.originalTransactionID, purchasedAt: source.purchasedAt,
            expiresAt: isLifetime ? nil : Date(timeIntervalSinceReferenceDate: grant.accessEnd),
            periodEndsAt: isLifetime ? nil : Date(timeIntervalSinceReferenceDate: grant.periodEnd),
            gracePeriodExpiresAt: isLifetime ? nil : grace,
            willRenew: grant.kind == .autoRenewable && status.isAlive && willAutoRenew == true,
            revokedAt: nil, revocationReason: nil)
    }

    /// The state of an entitlement with no grant giving access, sourced from its latest
    /// transaction: `revoked` if that is revoked, else `expired`.
    private static func lapsedEntitlementState(
        _ entitlement: Entitlement, latest: TransactionAggregate, catalogue: Catalogue
    ) -> EntitlementState {
        let revocation = latest.revocationInForce
        let revoked = revocation != nil
        return EntitlementState(
            id: entitlement.id, tier: entitlement.tierID, status: revoked ? .revoked : .expired,
            productID: latest.productID,
            productKind: catalogue.products[latest.productID]?.kind ?? .autoRenewable,
            sourceTransactionID: latest.transactionID, originalTransactionID: latest.originalTransactionID,
            purchasedAt: latest.purchasedAt, expiresAt: nil, periodEndsAt: nil, gracePeriodExpiresAt: nil,
            willRenew: false, revokedAt: revocation?.revokedAt, revocationReason: revocation?.reason)
    }
}

extension EntitlementState {
    /// Takes the subscription's renewal details: the reason and price increase as they are, the
    /// renewal product and date only while the entitlement will renew.
    mutating func take(_ renewal: RenewalDetails) {
        expirationReason = renewal.expirationReason
        priceIncreaseStatus = renewal.priceIncreaseStatus
        renewalProductID = willRenew ? renewal.renewalProductID : nil
        renewalDate = willRenew ? renewal.renewalDate : nil
    }
}
