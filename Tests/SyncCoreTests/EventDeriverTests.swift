import Foundation
import SyncCore
import Testing

/// Which events fire for which change, derived from docs/RESOLUTION.md ("Events") and the rules in
/// ``EventDeriver``.
@Suite struct EventDeriverTests {
    let jan1 = utc(2025, 1, 1)
    let feb1 = utc(2025, 2, 1)
    let mar1 = utc(2025, 3, 1)

    @Test func activateRenewRevokeRestoreExpire() {
        let first = report(
            "a", transaction: "t1", original: "o1", product: ProductID.premiumMonthly, purchased: jan1,
            expires: feb1, observed: jan1)
        let renewal = report(
            "b", transaction: "t2", original: "o1", product: ProductID.premiumMonthly, purchased: feb1,
            expires: mar1, observed: feb1)
        let refund = report(
            "c", transaction: "t2", original: "o1", product: ProductID.premiumMonthly, purchased: feb1,
            expires: mar1, revoked: utc(2025, 2, 10), observed: utc(2025, 2, 10))
        let reversal = report(
            "d", transaction: "t2", original: "o1", product: ProductID.premiumMonthly, purchased: feb1,
            expires: mar1, observed: utc(2025, 2, 15), trust: .verified(signedDate: utc(2025, 2, 15)))

        // (reports known, resolution time, expected entitlement event, tier changes?)
        let steps: [([Report], Date, EventType)] = [
            ([first], utc(2025, 1, 2), .activated),
            ([first, renewal], utc(2025, 2, 2), .renewed),
            ([first, renewal, refund], utc(2025, 2, 11), .revoked),
            ([first, renewal, refund, reversal], utc(2025, 2, 16), .restored),
            ([first, renewal, refund, reversal], utc(2025, 3, 2), .expired),  // time passes
        ]
        var previous: AccountState?
        var allTypes: [EventType] = []
        for (reports, now, expected) in steps {
            let current = resolve(reports, at: now)
            let drafts = EventDeriver.events(previous: previous, current: current, now: now)
            let grantsBefore = previous?.entitlement("premium")?.isActive ?? false
            let grantsAfter = current.entitlement("premium")?.isActive ?? false
            // The entitlement event, then a tier change exactly when access flipped.
            var expectedTypes = [expected]
            if grantsBefore != grantsAfter { expectedTypes.append(.tierChanged) }
            #expect(drafts.map(\.type) == expectedTypes, "at \(now)")
            for draft in drafts {
                #expect(draft.state == current)
                #expect(draft.detectedAt == now)
                if draft.type == .tierChanged {
                    #expect(draft.entitlementID == nil)
                    #expect(draft.previousTier == previous?.tier)
                } else {
                    #expect(draft.entitlementID == "premium")
                    #expect(draft.previous == previous?.entitlement("premium"))
                    #expect(draft.current == current.entitlement("premium"))
                }
            }
            allTypes += drafts.map(\.type)
            previous = current
        }
        #expect(
            allTypes.map(\.rawValue) == [
                "entitlement.activated", "account.tier_changed", "entitlement.renewed", "entitlement.revoked",
                "account.tier_changed", "entitlement.restored", "account.tier_changed", "entitlement.expired",
                "account.tier_changed",
            ])
    }

    @Test func noEventsWhenNothingChanged() {
        let purchase = report(
            "a", transaction: "t1", product: ProductID.basicMonthly, purchased: jan1, expires: feb1, observed: jan1)
        let state = resolve([purchase], at: utc(2025, 1, 5))
        #expect(EventDeriver.events(previous: state, current: state, now: utc(2025, 1, 5)).isEmpty)
        // Time passing without crossing a transition changes nothing.
        let later = resolve([purchase], at: utc(2025, 1, 25))
        #expect(EventDeriver.events(previous: state, current: later, now: utc(2025, 1, 25)).isEmpty)
        // A duplicate report changes nothing either.
        let again = resolve([purchase, purchase], at: utc(2025, 1, 25))
        #expect(EventDeriver.events(previous: later, current: again, now: utc(2025, 1, 25)).isEmpty)
        // A first resolution of an empty account: nothing to say.
        let empty = resolve([], at: jan1)
        #expect(EventDeriver.events(previous: nil, current: empty, now: jan1).isEmpty)
    }

    @Test func graceAndBillingTransitions() {
        let failing = report(
            "a", transaction: "t1", product: ProductID.basicMonthly, purchased: jan1, expires: feb1,
            grace: utc(2025, 2, 10), billingRetry: true, observed: jan1)
        let active = resolve([failing], at: utc(2025, 1, 20))
        let grace = resolve([failing], at: utc(2025, 2, 2))
        let retry = resolve([failing], at: utc(2025, 2, 11))
        #expect(EventDeriver.events(previous: active, current: grace, now: utc(2025, 2, 2)).map(\.type) == [
            .gracePeriodStarted
        ])
        #expect(EventDeriver.events(previous: grace, current: retry, now: utc(2025, 2, 11)).map(\.type) == [
            .billingIssue, .tierChanged,
        ])
        // Recovery from billing retry is a renewal of the same subscription.
        let recovered = report(
            "b", transaction: "t2", product: ProductID.basicMonthly, purchased: utc(2025, 2, 12),
            expires: utc(2025, 3, 12), observed: utc(2025, 2, 12))
        let back = resolve([failing, recovered], at: utc(2025, 2, 12, 1))
        #expect(EventDeriver.events(previous: retry, current: back, now: utc(2025, 2, 12)).map(\.type) == [
            .renewed, .tierChanged,
        ])
    }

    @Test func renewalPreferenceAndProductChanges() {
        let on = report(
            "a", transaction: "t1", product: ProductID.basicMonthly, purchased: jan1, expires: feb1, autoRenew: true,
            observed: jan1)
        let off = report(
            "b", transaction: "t1", product: ProductID.basicMonthly, purchased: jan1, expires: feb1, autoRenew: false,
            observed: utc(2025, 1, 3))
        let now = utc(2025, 1, 4)
        let before = resolve([on], at: now)
        let after = resolve([on, off], at: now)
        #expect(EventDeriver.events(previous: before, current: after, now: now).map(\.type) == [.renewalChanged])

        // Crossgrade monthly → yearly within the same entitlement: a renewal (paid further) and
        // a product change; no tier change.
        let yearly = report(
            "c", transaction: "t2", product: ProductID.basicYearly, purchased: utc(2025, 1, 10),
            expires: utc(2026, 1, 10), observed: utc(2025, 1, 10))
        var upgradedMonthly = on
        upgradedMonthly.reportID = "a-up"
        upgradedMonthly.isUpgraded = true
        let crossgraded = resolve([on, upgradedMonthly, yearly], at: utc(2025, 1, 11))
        let previous = resolve([on], at: utc(2025, 1, 11))
        #expect(EventDeriver.events(previous: previous, current: crossgraded, now: utc(2025, 1, 11)).map(\.type) == [
            .renewed, .productChanged,
        ])
    }

    @Test func newPurchaseAfterRefundIsAnActivationNotARestore() {
        let refunded = report(
            "a", transaction: "t1", product: ProductID.premiumMonthly, purchased: jan1, expires: feb1,
            revoked: utc(2025, 1, 5), observed: utc(2025, 1, 5))
        let repurchase = report(
            "b", transaction: "t2", product: ProductID.premiumMonthly, purchased: utc(2025, 1, 6),
            expires: utc(2025, 2, 6), observed: utc(2025, 1, 6))
        let revoked = resolve([refunded], at: utc(2025, 1, 5, 12))
        let active = resolve([refunded, repurchase], at: utc(2025, 1, 7))
        #expect(revoked.entitlement("premium")?.status == .revoked)
        #expect(EventDeriver.events(previous: revoked, current: active, now: utc(2025, 1, 7)).map(\.type) == [
            .activated, .tierChanged,
        ])
    }

    @Test func otherChangesStillProduceAnEvent() {
        // Two subscriptions to one entitlement (e.g. family sharing plus own purchase); refunding
        // the later one moves the expiry earlier while access continues.
        let own = report(
            "a", transaction: "t1", product: ProductID.basicMonthly, purchased: jan1, expires: feb1, observed: jan1)
        let shared = report(
            "b", transaction: "t2", product: ProductID.basicMonthly, purchased: utc(2025, 1, 10),
            expires: utc(2025, 2, 10), observed: utc(2025, 1, 10))
        var refund = shared
        refund.reportID = "b-refund"
        refund.revokedAt = utc(2025, 1, 15)
        let now = utc(2025, 1, 16)
        let before = resolve([own, shared], at: now)
        let after = resolve([own, shared, refund], at: now)
        #expect(before.entitlement("basic")?.expiresAt == utc(2025, 2, 10))
        #expect(after.entitlement("basic")?.expiresAt == feb1)
        #expect(EventDeriver.events(previous: before, current: after, now: now).map(\.type) == [.updated])
    }

    @Test func eventsAreOrderedByEntitlementThenAccount() {
        let basic = report(
            "a", transaction: "t1", product: ProductID.basicMonthly, purchased: jan1, expires: feb1, observed: jan1)
        let business = report(
            "b", transaction: "t2", product: ProductID.businessMonthly, purchased: jan1, expires: feb1, observed: jan1)
        let premium = report(
            "c", transaction: "t3", product: ProductID.premiumMonthly, purchased: jan1, expires: feb1, observed: jan1)
        let state = resolve([premium, business, basic], at: utc(2025, 1, 2))
        let drafts = EventDeriver.events(previous: nil, current: state, now: utc(2025, 1, 2))
        #expect(drafts.map(\.entitlementID) == ["basic", "business", "premium", nil])
        #expect(drafts.map(\.type) == [.activated, .activated, .activated, .tierChanged])
        // And all of them expire together, in the same order.
        let expired = resolve([premium, business, basic], at: feb1)
        let expiry = EventDeriver.events(previous: state, current: expired, now: feb1)
        #expect(expiry.map(\.type) == [.expired, .expired, .expired, .tierChanged])
        #expect(expiry.last?.previousTier == "business")
        #expect(expiry.last?.state.tier == "free")
    }

    @Test func storedEventCarriesTheDraft() throws {
        let purchase = report(
            "a", transaction: "t1", product: ProductID.basicMonthly, purchased: jan1, expires: feb1, observed: jan1)
        let state = resolve([purchase], at: utc(2025, 1, 2))
        let drafts = EventDeriver.events(previous: nil, current: state, now: utc(2025, 1, 2))
        let events = drafts.enumerated().map { offset, draft in
            Event(draft: draft, id: "evt_\(offset)", accountID: "acct", sequence: Int64(offset + 1), occurredAt: draft.detectedAt)
        }
        #expect(events.map(\.sequence) == [1, 2])
        #expect(events[0].type == .activated)
        #expect(events[0].current == state.entitlement("basic"))
        #expect(events[1].type == .tierChanged)
        #expect(events[1].previousTier == nil)
    }
}
