import Foundation
import SyncCore
import Testing

/// Concrete multi-device stories, with expectations derived from the rules in docs/RESOLUTION.md.
@Suite struct ResolutionScenarioTests {
    let jan1 = utc(2025, 1, 1)
    let feb1 = utc(2025, 2, 1)
    let mar1 = utc(2025, 3, 1)

    @Test func staleIPadReportAfterIPhoneRenewalDoesNotShortenAccess() {
        // The iPhone sees the renewal (a new transaction, same original); the iPad, still on
        // January's data, reports later.
        let first = report(
            "a", transaction: "t1", original: "o1", product: ProductID.basicMonthly, purchased: jan1, expires: feb1,
            observed: utc(2025, 1, 2))
        let renewal = report(
            "b", transaction: "t2", original: "o1", product: ProductID.basicMonthly, purchased: feb1, expires: mar1,
            observed: utc(2025, 2, 1, 1))
        let staleIPad = report(
            "c", transaction: "t1", original: "o1", product: ProductID.basicMonthly, purchased: jan1, expires: feb1,
            autoRenew: false, observed: utc(2025, 2, 3), device: "ipad")
        let now = utc(2025, 2, 10)
        let states = [[first, renewal, staleIPad], [staleIPad, renewal, first], [renewal, staleIPad, first]].map {
            resolve($0, at: now)
        }
        #expect(Set(states).count == 1)
        let basic = states[0].entitlement("basic")
        #expect(basic?.status == .active)
        #expect(basic?.expiresAt == mar1)
        #expect(basic?.sourceTransactionID == "t2")
        #expect(basic?.willRenew == true)  // from the renewal's report, not the stale t1
        #expect(states[0].tier == "basic")

        // Same transaction, stale expiry reported later: last-expiry-wins.
        let fresh = report(
            "d", transaction: "t9", product: ProductID.basicMonthly, purchased: jan1, expires: mar1,
            observed: utc(2025, 1, 20))
        let stale = report(
            "e", transaction: "t9", product: ProductID.basicMonthly, purchased: jan1, expires: feb1,
            observed: utc(2025, 2, 5), device: "ipad")
        #expect(resolve([fresh, stale], at: now).entitlement("basic")?.expiresAt == mar1)
    }

    @Test func refundOnOneDeviceWinsOverOlderOrStaleActiveReports() {
        let revokedAt = utc(2025, 1, 10)
        let active = report(
            "a", transaction: "t1", product: ProductID.premiumMonthly, purchased: jan1, expires: feb1,
            observed: utc(2025, 1, 5), device: "ipad")
        let refund = report(
            "b", transaction: "t1", product: ProductID.premiumMonthly, purchased: jan1, expires: feb1,
            revoked: revokedAt, reason: .other, observed: utc(2025, 1, 10, 1))
        // A device that has not synced StoreKit yet keeps saying "active", even after the refund.
        let staleAfter = report(
            "c", transaction: "t1", product: ProductID.premiumMonthly, purchased: jan1, expires: feb1,
            observed: utc(2025, 1, 12), device: "mac")
        // Even a verified snapshot signed *before* the refund does not undo it.
        let verifiedOld = report(
            "d", transaction: "t1", product: ProductID.premiumMonthly, purchased: jan1, expires: feb1,
            observed: utc(2025, 1, 13), device: "mac", trust: .verified(signedDate: utc(2025, 1, 9)))
        let now = utc(2025, 1, 15)
        for reports in [[active, refund, staleAfter, verifiedOld], [verifiedOld, staleAfter, refund, active]] {
            let state = resolve(reports, at: now)
            let premium = state.entitlement("premium")
            #expect(premium?.status == .revoked)
            #expect(premium?.isActive == false)
            #expect(premium?.revokedAt == revokedAt)
            #expect(premium?.revocationReason == .other)
            #expect(state.tier == Catalogue.default.baseTier.id)
            #expect(state.ads)
            #expect(state.nextTransitionAt == nil)
        }
    }

    @Test func refundReversedByLaterVerifiedSnapshot() {
        let revokedAt = utc(2025, 1, 10)
        let refund = report(
            "a", transaction: "t1", product: ProductID.premiumMonthly, purchased: jan1, expires: feb1,
            revoked: revokedAt, observed: utc(2025, 1, 10))
        let reversal = report(
            "b", transaction: "t1", product: ProductID.premiumMonthly, purchased: jan1, expires: feb1,
            observed: utc(2025, 1, 14), trust: .verified(signedDate: utc(2025, 1, 14)))
        let now = utc(2025, 1, 20)
        #expect(resolve([refund], at: now).entitlement("premium")?.status == .revoked)
        let restored = resolve([reversal, refund], at: now)
        #expect(restored.entitlement("premium")?.status == .active)
        #expect(restored.entitlement("premium")?.revokedAt == nil)
        #expect(restored.tier == "premium")

        // An unverified copy of the reversal (same content, no valid signature) does not count.
        var unverifiedReversal = reversal
        unverifiedReversal.reportID = "b2"
        unverifiedReversal.trust = ReportTrust(source: .device, isVerified: false, signedDate: utc(2025, 1, 14))
        #expect(resolve([refund, unverifiedReversal], at: now).entitlement("premium")?.status == .revoked)

        // A second refund after the reversal revokes again.
        let secondRefund = report(
            "c", transaction: "t1", product: ProductID.premiumMonthly, purchased: jan1, expires: feb1,
            revoked: utc(2025, 1, 16), observed: utc(2025, 1, 16))
        #expect(resolve([refund, reversal, secondRefund], at: now).entitlement("premium")?.status == .revoked)
    }

    @Test func operatorCanRevokeAndUnrevoke() {
        let purchase = report(
            "a", transaction: "t1", product: ProductID.businessMonthly, purchased: jan1, expires: feb1,
            observed: utc(2025, 1, 2))
        var adminRevoke = purchase
        adminRevoke.reportID = "admin-1"
        adminRevoke.trust = .admin(.revoke, at: utc(2025, 1, 5))
        var adminUnrevoke = purchase
        adminUnrevoke.reportID = "admin-2"
        adminUnrevoke.trust = .admin(.unrevoke, at: utc(2025, 1, 6))
        let now = utc(2025, 1, 7)
        #expect(resolve([purchase, adminRevoke], at: now).entitlement("business")?.status == .revoked)
        #expect(resolve([adminUnrevoke, purchase, adminRevoke], at: now).entitlement("business")?.status == .active)
        // A device cannot forge the operator's command: the action only counts on admin reports.
        var forged = adminUnrevoke
        forged.reportID = "forged"
        forged.trust = ReportTrust(source: .device, isVerified: false, signedDate: now, adminAction: .unrevoke)
        #expect(resolve([purchase, adminRevoke, forged], at: now).entitlement("business")?.status == .revoked)
        #expect(forged.validationErrors().map(\.field) == ["admin_action"])
    }

    @Test func operatorRevocationIsLiftedOnlyByAnOperator() {
        let purchase = report(
            "a", transaction: "t1", product: ProductID.premiumMonthly, purchased: jan1, expires: feb1,
            observed: utc(2025, 1, 2), trust: .verified(signedDate: utc(2025, 1, 1)))
        var adminRevoke = purchase
        adminRevoke.reportID = "admin-1"
        adminRevoke.trust = .admin(.revoke, at: utc(2025, 1, 5))
        // The user toggles auto-renew: Apple signs the transaction again, after the revoke.
        var resigned = purchase
        resigned.reportID = "b"
        resigned.observedAt = utc(2025, 1, 6)
        resigned.trust = .verified(signedDate: utc(2025, 1, 6))
        // The store's notification of it, signed later still.
        var notification = resigned
        notification.reportID = "asn:1"
        notification.trust = .verified(signedDate: utc(2025, 1, 7), source: .store)
        let now = utc(2025, 1, 10)
        for reports in [[purchase, adminRevoke, resigned, notification], [notification, resigned, adminRevoke, purchase]] {
            let premium = resolve(reports, at: now).entitlement("premium")
            #expect(premium?.status == .revoked)
            #expect(premium?.revokedAt == utc(2025, 1, 5))
        }
        // The store's refund and its reversal come and go; the operator's revocation stays.
        let refund = report(
            "c", transaction: "t1", product: ProductID.premiumMonthly, purchased: jan1, expires: feb1,
            revoked: utc(2025, 1, 3), reason: .developerIssue, observed: utc(2025, 1, 3),
            trust: .verified(signedDate: utc(2025, 1, 3), source: .store))
        #expect(resolve([purchase, refund, resigned], at: now).entitlement("premium")?.status == .active)
        #expect(resolve([purchase, refund, adminRevoke, resigned], at: now).entitlement("premium")?.status == .revoked)

        // Only the operator's unrevoke, later than the revoke, lifts it.
        var adminUnrevoke = purchase
        adminUnrevoke.reportID = "admin-2"
        adminUnrevoke.trust = .admin(.unrevoke, at: utc(2025, 1, 8))
        #expect(resolve([adminUnrevoke, notification, adminRevoke, purchase], at: now).entitlement("premium")?.status == .active)
        var earlyUnrevoke = adminUnrevoke
        earlyUnrevoke.trust = .admin(.unrevoke, at: utc(2025, 1, 4))
        #expect(resolve([earlyUnrevoke, notification, adminRevoke, purchase], at: now).entitlement("premium")?.status == .revoked)
        // An operator's unrevoke also lifts a store refund that is not later; a later refund revokes again.
        #expect(resolve([purchase, refund, adminUnrevoke], at: now).entitlement("premium")?.status == .active)
        var laterRefund = refund
        laterRefund.reportID = "d"
        laterRefund.revokedAt = utc(2025, 1, 9)
        laterRefund.trust = .verified(signedDate: utc(2025, 1, 9), source: .store)
        #expect(resolve([purchase, adminRevoke, adminUnrevoke, laterRefund], at: now).entitlement("premium")?.status == .revoked)
    }

    @Test func nonRenewingPassesBoughtOnTwoDevicesStack() {
        // A 3-month pass on the iPhone, then (before it ends) a 6-month pass on the iPad.
        let threeMonths = report(
            "a", transaction: "t1", product: ProductID.premiumPass3M, purchased: jan1, autoRenew: nil,
            observed: jan1)
        let sixMonths = report(
            "b", transaction: "t2", product: ProductID.premiumPass6M, purchased: utc(2025, 2, 15), autoRenew: nil,
            observed: utc(2025, 2, 15), device: "ipad")
        let nineMonthsLater = adding(.month, 9, to: jan1)
        #expect(nineMonthsLater == utc(2025, 10, 1))
        for reports in [[threeMonths, sixMonths], [sixMonths, threeMonths]] {
            let during = resolve(reports, at: utc(2025, 9, 30))
            let premium = during.entitlement("premium")
            #expect(premium?.status == .active)
            #expect(premium?.expiresAt == nineMonthsLater)
            #expect(premium?.sourceTransactionID == "t2")
            #expect(premium?.willRenew == false)
            #expect(during.nextTransitionAt == nineMonthsLater)
            #expect(resolve(reports, at: nineMonthsLater).entitlement("premium")?.status == .expired)
        }
        // Bought after the first pass ended: no stacking, it starts at its purchase.
        let late = report(
            "c", transaction: "t3", product: ProductID.premiumPass6M, purchased: utc(2025, 5, 1), autoRenew: nil,
            observed: utc(2025, 5, 1))
        #expect(
            resolve([threeMonths, late], at: utc(2025, 5, 2)).entitlement("premium")?.expiresAt
                == adding(.month, 6, to: utc(2025, 5, 1)))
        // A refunded pass drops out of the stack.
        var refunded = sixMonths
        refunded.reportID = "b-refund"
        refunded.revokedAt = utc(2025, 2, 20)
        let afterRefund = resolve([threeMonths, sixMonths, refunded], at: utc(2025, 3, 1))
        #expect(afterRefund.entitlement("premium")?.expiresAt == adding(.month, 3, to: jan1))
        #expect(afterRefund.entitlement("premium")?.sourceTransactionID == "t1")
    }

    @Test func upgradeFromBasicToPremiumMidPeriod() {
        let upgradeDay = utc(2025, 1, 15)
        let basic = report(
            "a", transaction: "t1", original: "o1", product: ProductID.basicMonthly, purchased: jan1, expires: feb1,
            observed: jan1)
        let basicUpgraded = report(
            "b", transaction: "t1", original: "o1", product: ProductID.basicMonthly, purchased: jan1, expires: feb1,
            upgraded: true, observed: upgradeDay, trust: .verified(signedDate: upgradeDay))
        let premium = report(
            "c", transaction: "t2", original: "o1", product: ProductID.premiumMonthly, purchased: upgradeDay,
            expires: utc(2025, 2, 15), observed: upgradeDay)
        // A stale device later reports the basic transaction without the upgrade flag.
        let staleBasic = report(
            "d", transaction: "t1", original: "o1", product: ProductID.basicMonthly, purchased: jan1, expires: feb1,
            observed: utc(2025, 1, 20), device: "ipad")
        let now = utc(2025, 1, 20)
        let before = resolve([basic], at: utc(2025, 1, 14))
        let after = resolve([basic, basicUpgraded, premium, staleBasic], at: now)
        #expect(before.tier == "basic")
        #expect(after.tier == "premium")
        #expect(after.entitlement("basic")?.status == .expired)  // upgraded away, not revoked
        #expect(after.entitlement("premium")?.status == .active)
        #expect(after.features.contains("video_calling"))
        #expect(after.features.contains("call_recording"))  // inherited from basic
        #expect(after.limits["monthly_minutes"] == .unlimited)
        let types = EventDeriver.events(previous: before, current: after, now: now).map(\.type)
        #expect(types == [.expired, .activated, .tierChanged])
    }

    @Test func gracePeriodThenRecovery() {
        let graceEnd = utc(2025, 2, 17)
        let failing = report(
            "a", transaction: "t1", original: "o1", product: ProductID.premiumMonthly, purchased: jan1,
            expires: feb1, grace: graceEnd, billingRetry: true, observed: utc(2025, 2, 1, 2))
        let inGrace = resolve([failing], at: utc(2025, 2, 5))
        let premium = inGrace.entitlement("premium")
        #expect(premium?.status == .gracePeriod)
        #expect(premium?.isActive == true)
        #expect(premium?.expiresAt == graceEnd)  // access end includes grace
        #expect(premium?.periodEndsAt == feb1)
        #expect(premium?.gracePeriodExpiresAt == graceEnd)
        #expect(inGrace.tier == "premium")
        #expect(inGrace.nextTransitionAt == graceEnd)
        #expect(resolve([failing], at: utc(2025, 1, 20)).entitlement("premium")?.status == .active)
        #expect(resolve([failing], at: utc(2025, 1, 20)).nextTransitionAt == feb1)

        let recovered = report(
            "b", transaction: "t2", original: "o1", product: ProductID.premiumMonthly, purchased: utc(2025, 2, 8),
            expires: utc(2025, 3, 8), observed: utc(2025, 2, 8))
        let afterRecovery = resolve([failing, recovered], at: utc(2025, 2, 9))
        #expect(afterRecovery.entitlement("premium")?.status == .active)
        #expect(afterRecovery.entitlement("premium")?.expiresAt == utc(2025, 3, 8))
        let types = EventDeriver.events(previous: inGrace, current: afterRecovery, now: utc(2025, 2, 9)).map(\.type)
        #expect(types == [.renewed])
    }

    @Test func billingRetryWithoutGraceMeansNoAccessThenExpiry() {
        let retrying = report(
            "a", transaction: "t1", product: ProductID.basicMonthly, purchased: jan1, expires: feb1,
            billingRetry: true, observed: utc(2025, 2, 1, 1))
        let active = resolve([retrying], at: utc(2025, 1, 31))
        #expect(active.entitlement("basic")?.status == .active)  // retry flag before expiry: still paid
        let inRetry = resolve([retrying], at: utc(2025, 2, 3))
        #expect(inRetry.entitlement("basic")?.status == .billingRetry)
        #expect(inRetry.entitlement("basic")?.isActive == false)
        #expect(inRetry.entitlement("basic")?.willRenew == true)
        #expect(inRetry.tier == "free")
        #expect(inRetry.nextTransitionAt == nil)

        // The store gives up: a verified snapshot without billing retry and auto-renew off.
        let gaveUp = report(
            "b", transaction: "t1", product: ProductID.basicMonthly, purchased: jan1, expires: feb1,
            autoRenew: false, observed: utc(2025, 3, 3), trust: .verified(signedDate: utc(2025, 3, 3)))
        let expired = resolve([retrying, gaveUp], at: utc(2025, 3, 4))
        #expect(expired.entitlement("basic")?.status == .expired)
        #expect(expired.entitlement("basic")?.willRenew == false)

        let firstTypes = EventDeriver.events(previous: active, current: inRetry, now: utc(2025, 2, 3)).map(\.type)
        #expect(firstTypes == [.billingIssue, .tierChanged])
        let secondTypes = EventDeriver.events(previous: inRetry, current: expired, now: utc(2025, 3, 4)).map(\.type)
        #expect(secondTypes == [.expired])
    }

    @Test func lifetimePurchaseNeverEnds() {
        let lifetime = report(
            "a", transaction: "t1", product: ProductID.premiumLifetime, purchased: jan1, autoRenew: nil,
            observed: jan1)
        let oldBasic = report(
            "b", transaction: "t0", product: ProductID.basicMonthly, purchased: utc(2024, 6, 1),
            expires: utc(2024, 7, 1), observed: utc(2024, 6, 1))
        for now in [jan1, utc(2060, 1, 1), utc(2099, 12, 31)] {
            let state = resolve([lifetime, oldBasic], at: now)
            let premium = state.entitlement("premium")
            #expect(premium?.status == .active)
            #expect(premium?.expiresAt == nil)
            #expect(premium?.productKind == .nonConsumable)
            #expect(premium?.willRenew == false)
            #expect(state.entitlement("basic")?.status == .expired)
            #expect(state.tier == "premium")
            #expect(state.nextTransitionAt == nil)
        }
    }

    @Test func unknownProductsAndConsumablesAreKeptButGrantNothing() {
        let unknown = report(
            "a", transaction: "t1", product: ProductID.unknown, purchased: jan1, expires: mar1, observed: jan1)
        let credits = report(
            "b", transaction: "t2", product: ProductID.credits, purchased: jan1, autoRenew: nil, observed: jan1)
        var ledger = TransactionLedger()
        ledger.add(unknown)
        ledger.add(credits)
        #expect(ledger.count == 2)
        #expect(ledger["t1"]?.productID == ProductID.unknown)
        let state = Resolver.resolve(ledger: ledger, catalogue: .default, now: feb1)
        #expect(state.entitlements.isEmpty)
        #expect(state.tier == "free")
        #expect(state.features == Catalogue.default.baseTier.features)
        #expect(state.limits["monthly_minutes"] == .limited(100))
        #expect(state.ads)
        #expect(state.nextTransitionAt == nil)
    }

    @Test func twoEntitlementsAtOnceTakeTheHighestTier() {
        let basic = report(
            "a", transaction: "t1", product: ProductID.basicMonthly, purchased: jan1, expires: feb1, observed: jan1)
        let business = report(
            "b", transaction: "t2", product: ProductID.businessYearly, purchased: utc(2025, 1, 10),
            expires: utc(2026, 1, 10), observed: utc(2025, 1, 10), device: "mac")
        let state = resolve([business, basic], at: utc(2025, 1, 20))
        #expect(state.entitlements.map(\.id) == ["basic", "business"])
        #expect(state.entitlements.allSatisfy { $0.status == .active })
        #expect(state.tier == "business")
        #expect(!state.ads)
        // Business has everything of the tiers below.
        for tier in Catalogue.default.tiers {
            #expect(Set(tier.features).isSubset(of: Set(state.features)))
        }
        #expect(state.features.contains("api_access"))
        // The earliest change is the basic subscription's expiry.
        #expect(state.nextTransitionAt == feb1)
        // After basic lapses, business alone still sets the tier.
        #expect(resolve([business, basic], at: utc(2025, 3, 1)).tier == "business")
    }

    @Test func nextTransitionAtIsTheEarliestFutureChange() {
        let subscription = report(
            "a", transaction: "t1", product: ProductID.basicMonthly, purchased: jan1, expires: feb1,
            grace: utc(2025, 2, 10), billingRetry: true, observed: jan1)
        let pass = report(
            "b", transaction: "t2", product: ProductID.premiumPass3M, purchased: jan1, autoRenew: nil, observed: jan1)
        let reports = [subscription, pass]
        var now = utc(2025, 1, 5)
        var seen: [Date] = []
        // Walk from transition to transition: each is strictly later, and the state really
        // changes there (and not just before).
        while let next = resolve(reports, at: now).nextTransitionAt {
            #expect(next > now)
            let justBefore = next.addingTimeInterval(-1)
            #expect(resolve(reports, at: justBefore).entitlements == resolve(reports, at: now).entitlements)
            #expect(resolve(reports, at: next).entitlements != resolve(reports, at: justBefore).entitlements)
            seen.append(next)
            now = next
        }
        #expect(seen == [feb1, utc(2025, 2, 10), adding(.month, 3, to: jan1)])
    }
}
