import Foundation

/// Which allowance period an account in a resolved state has at an instant, for each meter
/// (``UsageTimeline`` walks an account's history with it; nothing records its answer).
///
/// The period follows what gives the account its tier:
/// - **A subscription or pass** (the active entitlement of the account's tier; of several, the one
///   reaching furthest): periods of the meter's length stepped from its source transaction's
///   purchase. A subscription renewing on the 14th is renewed by a transaction purchased on the
///   14th, so its periods reset on the 14th; a yearly one has monthly periods from its purchase
///   day; an upgrade is a new purchase, so the new tier's period starts at the upgrade.
/// - **A lifetime purchase**: calendar periods (from 1970-01-01 UTC: calendar months for `P1M`),
///   starting no earlier than the purchase.
/// - **The base tier**: calendar periods, starting no earlier than the moment the last paid access
///   ended (an expiry or a revocation in the same month), so a lapse starts a free period instead
///   of reaching back into the paid one.
public enum UsageAllowances {
    /// The period of `meter` containing `now` for an account in `state` (resolved at `now`), the
    /// tier whose allowance it has, and that allowance.
    public static func period(
        of meter: Meter, for state: AccountState, catalogue: Catalogue, at now: Date
    ) -> (period: UsagePeriod, tier: String, allowance: LimitValue) {
        let source = state.entitlements
            .filter { $0.isActive && $0.tier == state.tier }
            .max { ($0.expiresAt ?? .distantPast, $0.id) < ($1.expiresAt ?? .distantPast, $1.id) }
        let period: UsagePeriod
        switch source {
        case .some(let source) where source.expiresAt != nil:
            period = UsagePeriod.containing(now, anchor: source.purchasedAt, length: meter.period)
        case .some(let source):
            var calendar = UsagePeriod.containing(now, anchor: UsagePeriod.calendarAnchor, length: meter.period)
            calendar.start = max(calendar.start, source.purchasedAt)
            period = calendar
        case nil:
            var calendar = UsagePeriod.containing(now, anchor: UsagePeriod.calendarAnchor, length: meter.period)
            let lastPaidEnd = state.entitlements.compactMap { entitlement -> Date? in
                let ends = [entitlement.expiresAt, entitlement.revokedAt].compactMap { $0 }.filter { $0 <= now }
                return ends.max()
            }.max()
            if let lastPaidEnd { calendar.start = max(calendar.start, lastPaidEnd) }
            period = calendar
        }
        return (period, state.tier, meter.allowance(tierRank: catalogue.tier(id: state.tier)?.rank ?? 0))
    }
}
