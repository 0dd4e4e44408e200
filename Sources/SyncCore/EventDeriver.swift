import Foundation

/// Derives the events of one change of an account's resolved state (docs/RESOLUTION.md, "Events").
///
/// For each entitlement present before or after (with `prev`/`cur` its state, `nil` if absent),
/// these fire, each at most once, in this order:
///
/// 1. `restored`: prev is `revoked`, cur is not, and cur's source is the same transaction (the
///    revocation was reversed).
/// 2. `activated`: cur grants access, and prev is absent, `expired`, or `revoked` without being
///    restored (a new purchase after a refund).
/// 3. `renewed`: cur grants access and either prev granted access with an earlier
///    `period_ends_at` (nil = lifetime = latest), or prev was `billing_retry` (recovered).
/// 4. `product_changed`: prev and cur alive (see ``EntitlementStatus/isAlive``), products differ.
/// 5. `renewal_changed`: prev and cur alive, and `will_renew` differs, or the pending product
///    change (a `renewal_product_id` other than `product_id`: an upgrade, downgrade or
///    crossgrade), or whether a price increase awaits consent (`price_increase_status` pending).
///    A renewal product or price increase status first learnt (null before) that changes neither
///    is `updated`.
/// 6. `grace_period_started`: cur is `grace_period`, prev is not.
/// 7. `billing_issue`: cur is `billing_retry`, prev is not.
/// 8. `expired`: cur is `expired` (or the entitlement vanished), prev was not.
/// 9. `revoked`: cur is `revoked`, prev is not.
/// 10. `updated`: prev ≠ cur and none of the above fired.
///
/// Entitlements are visited in id order, and `account.tier_changed` comes last: it fires when
/// tier, features, limits or ads differ (with no previous state: when any entitlement grants
/// access). Equal states yield no events; a change of `next_transition_at` alone is not an event.
///
/// Typical transitions: active → grace: `grace_period_started`; grace → active after a renewal:
/// `renewed`; active → billing retry: `billing_issue`; billing retry → active: `renewed`;
/// expired → active: `activated`; revoked → active (refund reversed): `restored`; upgrade from
/// basic to premium: basic `expired`, premium `activated`, `account.tier_changed`.
public enum EventDeriver {
    /// The events for the change from `previous` (`nil`: the account had no resolved state yet)
    /// to `current`, detected by a resolution at `now`.
    public static func events(previous: AccountState?, current: AccountState, now: Date) -> [EventDraft] {
        if let previous, previous == current { return [] }
        var drafts: [EventDraft] = []

        let before = previous?.entitlements ?? []
        let after = current.entitlements
        var i = 0
        var j = 0
        // Both lists are sorted by id: walk them together.
        while i < before.count || j < after.count {
            let prev: EntitlementState?
            let cur: EntitlementState?
            if j >= after.count || (i < before.count && before[i].id < after[j].id) {
                prev = before[i]
                cur = nil
                i += 1
            } else if i >= before.count || after[j].id < before[i].id {
                prev = nil
                cur = after[j]
                j += 1
            } else {
                prev = before[i]
                cur = after[j]
                i += 1
                j += 1
            }
            guard prev != cur else { continue }
            for type in entitlementEventTypes(previous: prev, current: cur) {
                drafts.append(
                    EventDraft(
                        type: type, entitlementID: cur?.id ?? prev?.id, previous: prev, current: cur,
                        state: current, detectedAt: now))
            }
        }

        let tierChanged: Bool
        if let previous {
            tierChanged =
                previous.tier != current.tier || previous.features != current.features
                || previous.limits != current.limits || previous.ads != current.ads
        } else {
            tierChanged = current.entitlements.contains { $0.isActive }
        }
        if tierChanged {
            drafts.append(
                EventDraft(
                    type: .tierChanged, entitlementID: nil, previous: nil, current: nil,
                    previousTier: previous?.tier, state: current, detectedAt: now))
        }
        return drafts
    }

    /// The entitlement event types for `previous` → `current` (which differ), in emission order.
    static func entitlementEventTypes(previous: EntitlementState?, current: EntitlementState?) -> [EventType] {
        var types: [EventType] = []
        let prevStatus = previous?.status
        let curStatus = current?.status
        let prevAlive = prevStatus?.isAlive ?? false
        let curAlive = curStatus?.isAlive ?? false
        let curGrants = curStatus?.grantsAccess ?? false

        // Restored only when the revoked transaction itself came back; a new purchase after a
        // refund is an activation.
        let restored =
            prevStatus == .revoked && curStatus != nil && curStatus != .revoked
            && previous?.sourceTransactionID == current?.sourceTransactionID
        if restored { types.append(.restored) }
        if curGrants && !restored && (prevStatus == nil || prevStatus == .expired || prevStatus == .revoked) {
            types.append(.activated)
        }
        if curGrants, let previous, let current {
            if previous.status == .billingRetry {
                types.append(.renewed)
            } else if previous.status.grantsAccess && paidFurther(from: previous, to: current) {
                types.append(.renewed)
            }
        }
        if prevAlive && curAlive, let previous, let current {
            if previous.productID != current.productID { types.append(.productChanged) }
            if previous.willRenew != current.willRenew || previous.pendingProductChange != current.pendingProductChange
                || previous.awaitsPriceConsent != current.awaitsPriceConsent
            {
                types.append(.renewalChanged)
            }
        }
        if curStatus == .gracePeriod && prevStatus != .gracePeriod { types.append(.gracePeriodStarted) }
        if curStatus == .billingRetry && prevStatus != .billingRetry { types.append(.billingIssue) }
        if (curStatus == .expired || (current == nil && previous != nil)) && prevStatus != .expired {
            types.append(.expired)
        }
        if curStatus == .revoked && prevStatus != .revoked { types.append(.revoked) }
        if types.isEmpty { types.append(.updated) }
        return types
    }

    /// Whether the paid period reaches further in `current` than in `previous` (lifetime = ∞).
    private static func paidFurther(from previous: EntitlementState, to current: EntitlementState) -> Bool {
        switch (previous.periodEndsAt, current.periodEndsAt) {
        case (.some(let before), .some(let after)): after > before
        case (.some, nil): current.productKind == .nonConsumable
        case (nil, _): false
        }
    }
}

extension EntitlementState {
    /// The product a pending upgrade, downgrade or crossgrade renews to; `nil` when it renews to
    /// its own product or nothing is known.
    var pendingProductChange: String? {
        guard let renewalProductID, renewalProductID != productID else { return nil }
        return renewalProductID
    }

    /// Whether a price increase awaits the subscriber's consent.
    var awaitsPriceConsent: Bool { priceIncreaseStatus == .pending }
}
