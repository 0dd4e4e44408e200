import Foundation

/// Which allowance an account had at every moment, for each meter: a pure function of its
/// transactions (the facts), the instant its history starts and the time (docs/USAGE.md, "Which
/// allowance an account has").
///
/// The allowance of a period is *derived*, never recorded: what the service happened to know when
/// a usage arrived (a subscription not reported yet) cannot change the bill. The timeline is
/// recomputed from the transactions whenever a balance is needed, so a late report of a
/// subscription moves the periods it covers and the usage in them.
///
/// **The account as it stood at `t`.** The transactions are taken as they were at that instant:
/// - a purchase counts from its `purchased_at` (a purchase made later was not had yet);
/// - a revocation counts from its `revoked_at`, a reinstatement from its time (the access the
///   account had before a refund was access it had: usage then was within that allowance);
/// - an upgraded transaction gives way at the purchase of the next transaction of the same
///   subscription (same original transaction id); with no such purchase known, it gives nothing
///   (as in the resolved state);
/// - consumables and products outside the catalogue's entitlements give no tier and are left out.
///
/// **Periods.** At each instant, the period of the rule in ``UsageAllowances`` (stepped from the
/// source purchase of a subscription or pass, calendar periods for a lifetime purchase or the base
/// tier). Walking the instants where anything changes (a purchase, an expiry or grace end, a
/// revocation or reinstatement, a period's end), the periods are laid end to end: a change that
/// starts another period *cuts* the one before at that instant, so the timeline is a partition of
/// time with no overlap, and every instant (a usage, a grant) belongs to exactly one period. A
/// change inside the same period (the same start and end) keeps the period and its larger
/// allowance, so an upgrade that keeps the period never takes units away.
///
/// Each period has its tier's full allowance, also when a change cut it short (a user who lapses
/// mid-month gets the free allowance for the rest of that month).
public enum UsageTimeline {
    /// One allowance period of one meter.
    public struct Period: Sendable, Hashable {
        /// The period as the account had it: `[start, end)`, cut where another began.
        public var period: UsagePeriod
        /// The tier that gave it (the higher, when two tiers shared the period).
        public var tier: String
        public var allowance: LimitValue

        public init(period: UsagePeriod, tier: String, allowance: LimitValue) {
            self.period = period
            self.tier = tier
            self.allowance = allowance
        }
    }

    /// The most instants one walk looks at: a bound against absurd inputs, far above what years
    /// of monthly renewals need (a few instants a period).
    static let maximumSteps = 100_000

    /// The periods of `meter` from the one containing `start` to the one containing `now`, in
    /// order, end to end.
    public static func periods(
        meter: Meter, catalogue: Catalogue, transactions: some Sequence<TransactionAggregate>, from start: Date, through now: Date
    ) -> [Period] {
        let tiered = transactions.filter { aggregate in
            guard let product = catalogue.products[aggregate.productID] else { return false }
            return product.entitlementIndex != nil
        }
        let replacements = replacementTimes(of: tiered)
        var changes: [Date] = []
        for aggregate in tiered {
            changes.append(aggregate.purchasedAt)
            for change in [
                aggregate.storeRevocation?.revokedAt, aggregate.storeReinstatedAt, aggregate.operatorRevocation?.revokedAt,
                aggregate.operatorReinstatedAt,
            ] {
                if let change { changes.append(change) }
            }
        }
        changes.sort()

        // The account as it stood at `t`, and the allowance period in force then.
        func standing(at t: Date) -> (state: AccountState, period: UsagePeriod, tier: String, allowance: LimitValue) {
            let state = Resolver.resolve(transactions: asOf(t, tiered, replacements: replacements), catalogue: catalogue, now: t)
            let (period, tier, allowance) = UsageAllowances.period(of: meter, for: state, catalogue: catalogue, at: t)
            return (state, period, tier, allowance)
        }

        var result: [Period] = []
        var natural: UsagePeriod?
        var t = min(start, now)
        var nextChange = 0
        var reachedNow = false
        for _ in 0..<maximumSteps {
            let (state, current, tier, allowance) = standing(at: t)
            if let last = result.indices.last, natural == current {
                if allowance > result[last].allowance {
                    result[last].allowance = allowance
                    result[last].tier = tier
                }
            } else {
                if let last = result.indices.last { result[last].period.end = t }
                result.append(Period(period: UsagePeriod(start: result.isEmpty ? current.start : t, end: current.end), tier: tier, allowance: allowance))
                natural = current
            }
            while nextChange < changes.count, changes[nextChange] <= t { nextChange += 1 }
            var next = current.end
            if let transition = state.nextTransitionAt, transition > t { next = min(next, transition) }
            if nextChange < changes.count { next = min(next, changes[nextChange]) }
            guard next <= now, next > t else {
                reachedNow = true
                break
            }
            t = next
        }
        if !reachedNow {
            // Past the step bound (absurd inputs only), the timeline still reaches `now`: the
            // period in force at `now` closes it, so no later period is lost.
            let (_, current, tier, allowance) = standing(at: now)
            if let last = result.indices.last { result[last].period.end = t }
            if let last = result.last, last.period.end <= last.period.start { result.removeLast() }
            result.append(Period(period: UsagePeriod(start: result.last?.period.end ?? current.start, end: current.end), tier: tier, allowance: allowance))
        }
        return result
    }

    /// The timeline of `meter` after its **final** periods (docs/USAGE.md, "Final periods"): the
    /// stored `final` ones as they are (never derived again), then the periods derived from the
    /// transactions from the end of the last final one (the first of them starting exactly there,
    /// cut like any period a change cuts) through `now`. Without final periods, ``periods(meter:catalogue:transactions:from:through:)``
    /// from `start`.
    public static func periods(
        meter: Meter, catalogue: Catalogue, transactions: some Sequence<TransactionAggregate>, from start: Date, through now: Date,
        after final: [Period]
    ) -> [Period] {
        guard let boundary = final.last?.period.end, boundary <= now else {
            return periods(meter: meter, catalogue: catalogue, transactions: transactions, from: start, through: now)
        }
        var open = periods(meter: meter, catalogue: catalogue, transactions: transactions, from: boundary, through: now)
        if !open.isEmpty { open[0].period.start = max(open[0].period.start, boundary) }
        return final + open.filter { $0.period.end > $0.period.start }
    }

    /// The allowance entries of `meter` over a timeline (one per period; what ``UsageBalance``
    /// joins with the recorded entries).
    public static func allowances(meter: Meter, periods: [Period]) -> [UsageEntry] {
        periods.map { UsageEntry.allowance(meter: meter.id, tier: $0.tier, units: $0.allowance, period: $0.period) }
    }

    /// The transactions as they stood at `t` (see the type's documentation).
    static func asOf(_ t: Date, _ transactions: [TransactionAggregate], replacements: [String: Date]) -> [TransactionAggregate] {
        var view: [TransactionAggregate] = []
        view.reserveCapacity(transactions.count)
        for var aggregate in transactions where aggregate.purchasedAt <= t {
            if let revocation = aggregate.storeRevocation, revocation.revokedAt > t { aggregate.storeRevocation = nil }
            if let reinstated = aggregate.storeReinstatedAt, reinstated > t { aggregate.storeReinstatedAt = nil }
            if let revocation = aggregate.operatorRevocation, revocation.revokedAt > t { aggregate.operatorRevocation = nil }
            if let reinstated = aggregate.operatorReinstatedAt, reinstated > t {
                aggregate.operatorReinstatedAt = nil
                aggregate.operatorLiftsStoreBefore = nil
            }
            if aggregate.isUpgraded, let replaced = replacements[aggregate.transactionID], replaced > t {
                aggregate.isUpgraded = false
            }
            view.append(aggregate)
        }
        return view
    }

    /// For each upgraded transaction, the purchase of the next transaction of the same
    /// subscription (the one that replaced it), when known.
    static func replacementTimes(of transactions: [TransactionAggregate]) -> [String: Date] {
        var bySubscription: [String: [TransactionAggregate]] = [:]
        for aggregate in transactions { bySubscription[aggregate.originalTransactionID, default: []].append(aggregate) }
        var times: [String: Date] = [:]
        for aggregate in transactions where aggregate.isUpgraded {
            let later = bySubscription[aggregate.originalTransactionID, default: []]
                .filter { $0.transactionID != aggregate.transactionID && $0.purchasedAt > aggregate.purchasedAt }
                .map(\.purchasedAt)
            if let replaced = later.min() { times[aggregate.transactionID] = replaced }
        }
        return times
    }
}
