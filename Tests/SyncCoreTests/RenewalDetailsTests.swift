import Foundation
import SyncCore
import Testing

/// Renewal details (docs/RESOLUTION.md, *Renewal details*): why a subscription ended, what it
/// renews to, a price increase, the next renewal; per subscription, the renewal info signed
/// latest wins.
@Suite struct RenewalDetailsTests {
    let jan1 = utc(2025, 1, 1)
    let feb1 = utc(2025, 2, 1)
    let mar1 = utc(2025, 3, 1)

    /// A monthly basic subscription's report of `transaction` carrying `renewal`.
    func renewalReport(
        _ id: String, transaction: String, purchased: Date, expires: Date, autoRenew: Bool = true,
        renewal: RenewalDetails?, observed: Date, trust: ReportTrust = .verified(signedDate: utc(2025, 1, 1))
    ) -> Report {
        var made = report(
            id, transaction: transaction, original: "o1", product: ProductID.basicMonthly, purchased: purchased,
            expires: expires, autoRenew: autoRenew, observed: observed, trust: trust)
        made.renewal = renewal
        return made
    }

    @Test func theRenewalInfoSignedLatestWinsAcrossTheSubscriptionsTransactionsInAnyOrder() throws {
        // The February renewal's report carries renewal info signed on Jan 20 (downgrade to
        // nothing pending); the January transaction's report, sent later by another device,
        // carries renewal info signed on Jan 25: a pending crossgrade to yearly. The later
        // signature wins, although it came with the older transaction.
        let january = renewalReport(
            "a", transaction: "t1", purchased: jan1, expires: feb1,
            renewal: RenewalDetails(renewalProductID: ProductID.basicYearly, renewalDate: mar1, signedAt: utc(2025, 1, 25)),
            observed: utc(2025, 1, 25))
        let february = renewalReport(
            "b", transaction: "t2", purchased: feb1, expires: mar1,
            renewal: RenewalDetails(renewalProductID: ProductID.basicMonthly, priceIncreaseStatus: .pending, renewalDate: mar1, signedAt: utc(2025, 1, 20)),
            observed: utc(2025, 2, 1))
        // An unsigned (development) statement observed last loses to every signed one.
        let unsigned = renewalReport(
            "c", transaction: "t2", purchased: feb1, expires: mar1,
            renewal: RenewalDetails(expirationReason: .billingError, renewalProductID: ProductID.basicMonthly),
            observed: utc(2025, 2, 10), trust: .unverifiedDevice)
        let now = utc(2025, 2, 11)
        for order in [[january, february, unsigned], [unsigned, february, january], [february, unsigned, january]] {
            let basic = try #require(resolve(order, at: now).entitlement("basic"))
            #expect(basic.status == .active)
            #expect(basic.willRenew)
            #expect(basic.renewalProductID == ProductID.basicYearly)
            #expect(basic.renewalDate == mar1)
            #expect(basic.priceIncreaseStatus == nil)  // the winner says nothing of one: as a whole
            #expect(basic.expirationReason == nil)
        }
    }

    @Test func unsignedDetailsStandWhileNothingSignedIsKnown() throws {
        let unsigned = renewalReport(
            "a", transaction: "t1", purchased: jan1, expires: feb1,
            renewal: RenewalDetails(renewalProductID: ProductID.premiumMonthly, priceIncreaseStatus: .accepted, renewalDate: feb1),
            observed: utc(2025, 1, 2), trust: .unverifiedDevice)
        let basic = try #require(resolve([unsigned], at: utc(2025, 1, 3)).entitlement("basic"))
        #expect(basic.renewalProductID == ProductID.premiumMonthly)
        #expect(basic.priceIncreaseStatus == .accepted)
        #expect(basic.renewalDate == feb1)
    }

    @Test func renewalProductAndDateOnlyWhileRenewingTheReasonOnceEnded() throws {
        let cancelled = renewalReport(
            "a", transaction: "t1", purchased: jan1, expires: feb1, autoRenew: false,
            renewal: RenewalDetails(
                expirationReason: .cancelled, renewalProductID: ProductID.basicMonthly, priceIncreaseStatus: .pending,
                renewalDate: feb1, signedAt: utc(2025, 2, 1, 1)),
            observed: utc(2025, 2, 1, 1))
        let before = try #require(resolve([cancelled], at: utc(2025, 1, 20)).entitlement("basic"))
        #expect(!before.willRenew)
        #expect(before.renewalProductID == nil)
        #expect(before.renewalDate == nil)
        #expect(before.priceIncreaseStatus == .pending)
        let after = try #require(resolve([cancelled], at: utc(2025, 2, 2)).entitlement("basic"))
        #expect(after.status == .expired)
        #expect(after.expirationReason == .cancelled)
        #expect(after.renewalProductID == nil)
    }

    @Test func onlyAutoRenewableEntitlementsCarryRenewalDetails() throws {
        var lifetime = report(
            "a", transaction: "t1", product: ProductID.premiumLifetime, purchased: jan1, autoRenew: nil, observed: jan1)
        lifetime.renewal = RenewalDetails(expirationReason: .other, signedAt: jan1)
        let premium = try #require(resolve([lifetime], at: utc(2025, 1, 2)).entitlement("premium"))
        #expect(premium.expirationReason == nil)
    }

    @Test func storeKitCodesMapToNames() throws {
        #expect((1...5).map(ExpirationReason.init(intent:)) == [
            .cancelled, .billingError, .priceIncreaseDeclined, .productUnavailable, .other,
        ])
        #expect(ExpirationReason(intent: 99) == .other)
        #expect(PriceIncreaseStatus(code: 0) == .pending)
        #expect(PriceIncreaseStatus(code: 1) == .accepted)
        #expect(PriceIncreaseStatus(code: 2) == nil)
        let decoded = try WireJSON.decoder.decode([ExpirationReason].self, from: Data(#"[2, "PRICE_INCREASE_DECLINED", "other"]"#.utf8))
        #expect(decoded == [.billingError, .priceIncreaseDeclined, .other])
        #expect(throws: DecodingError.self) { try WireJSON.decoder.decode([ExpirationReason].self, from: Data(#"["bored"]"#.utf8)) }
        #expect(throws: DecodingError.self) { try WireJSON.decoder.decode([PriceIncreaseStatus].self, from: Data("[7]".utf8)) }
    }

    @Test func unsignedWireFieldsDecodeIntoRenewalDetailsAndAreValidated() throws {
        let body = #"""
            {"report_id": "r1", "device_id": "d1", "observed_at": "2025-01-02T00:00:00Z", "product_id": "voip.basic.monthly",
             "original_transaction_id": "o1", "transaction_id": "t1", "purchased_at": "2025-01-01T00:00:00Z",
             "expiration_reason": 1, "renewal_product_id": "voip.basic.yearly", "price_increase_status": "accepted",
             "renewal_date": "2025-02-01T00:00:00Z"}
            """#
        let decoded = try WireJSON.decoder.decode(Report.self, from: Data(body.utf8))
        #expect(decoded.renewal == RenewalDetails(
            expirationReason: .cancelled, renewalProductID: ProductID.basicYearly, priceIncreaseStatus: .accepted,
            renewalDate: feb1))
        let roundTrip = try WireJSON.decoder.decode(Report.self, from: WireJSON.encoder.encode(decoded))
        #expect(roundTrip.renewal == decoded.renewal)
        var bad = decoded
        bad.renewal?.renewalProductID = "no spaces allowed"
        #expect(bad.validationErrors().map(\.field) == ["renewal_product_id"])
        bad.renewal?.renewalProductID = nil
        bad.renewal?.renewalDate = utc(2150, 1, 1)
        #expect(bad.validationErrors().map(\.field) == ["renewal_date"])
    }

    @Test func autoRenewAndBillingRetryFollowTheRenewalInfoSignedLatestNotTheDevicesObservedTime() throws {
        // The store said auto-renew off (renewal info signed Jan 20). A device then resends the
        // genuine transaction with renewal info it cached on Jan 10 (auto-renew on) and a later
        // observed_at, so its report becomes the transaction's representative: auto-renew stays off.
        let off = renewalReport(
            "a", transaction: "t1", purchased: jan1, expires: feb1, autoRenew: false,
            renewal: RenewalDetails(renewalProductID: ProductID.basicMonthly, signedAt: utc(2025, 1, 20)), observed: utc(2025, 1, 20))
        let stale = renewalReport(
            "b", transaction: "t1", purchased: jan1, expires: feb1, autoRenew: true,
            renewal: RenewalDetails(renewalProductID: ProductID.basicMonthly, signedAt: utc(2025, 1, 10)), observed: utc(2025, 1, 25))
        let now = utc(2025, 1, 26)
        for order in [[off, stale], [stale, off]] {
            let basic = try #require(resolve(order, at: now).entitlement("basic"))
            #expect(!basic.willRenew)
            #expect(basic.renewalProductID == nil)
        }
        #expect(TransactionAggregate.aggregate([off, stale]).first?.willAutoRenew == true, "the representative is the stale report")

        // Billing retry likewise: the latest signed renewal info says the retry is over.
        var retrying = stale
        retrying.reportID = "c"
        retrying.inBillingRetry = true
        retrying.renewal?.signedAt = utc(2025, 1, 5)
        var settled = off
        settled.reportID = "d"
        settled.inBillingRetry = false
        settled.willAutoRenew = true
        settled.renewal?.signedAt = utc(2025, 2, 3)
        let afterExpiry = utc(2025, 2, 5)
        #expect(resolve([retrying], at: afterExpiry).entitlement("basic")?.status == .billingRetry)
        #expect(resolve([retrying, settled], at: afterExpiry).entitlement("basic")?.status == .expired)
    }

    @Test func anEntitlementUpgradedAwayKeepsNoLiveSubscriptionsDetails() throws {
        // Basic monthly upgraded to premium monthly within one subscription (one original).
        var basic = renewalReport(
            "a", transaction: "t1", purchased: jan1, expires: feb1, renewal: nil, observed: jan1)
        basic.isUpgraded = true
        var premium = report(
            "b", transaction: "t2", original: "o1", product: ProductID.premiumMonthly, purchased: utc(2025, 1, 10),
            expires: utc(2025, 2, 10), observed: utc(2025, 1, 10), trust: .verified(signedDate: utc(2025, 1, 10)))
        premium.renewal = RenewalDetails(priceIncreaseStatus: .pending, signedAt: utc(2025, 1, 11))
        let state = resolve([basic, premium], at: utc(2025, 1, 12))
        #expect(state.entitlement("premium")?.priceIncreaseStatus == .pending)
        #expect(state.entitlement("basic")?.status == .expired)
        #expect(state.entitlement("basic")?.priceIncreaseStatus == nil)
    }

    @Test func aRenewalProductOrPriceIncreaseFirstLearntWithoutChangeIsAnUpdate() {
        let now = utc(2025, 1, 10)
        let unknown = renewalReport("a", transaction: "t1", purchased: jan1, expires: feb1, renewal: nil, observed: utc(2025, 1, 2))
        let same = renewalReport(
            "b", transaction: "t1", purchased: jan1, expires: feb1,
            renewal: RenewalDetails(renewalProductID: ProductID.basicMonthly, priceIncreaseStatus: .accepted, signedAt: utc(2025, 1, 3)),
            observed: utc(2025, 1, 3))
        let before = resolve([unknown], at: now)
        let after = resolve([unknown, same], at: now)
        #expect(EventDeriver.events(previous: before, current: after, now: now).map(\.type) == [.updated])
    }

    @Test func aPendingCrossgradeOrPriceIncreaseIsARenewalChangeAReasonAloneAnUpdate() {
        let now = utc(2025, 1, 10)
        let plain = renewalReport(
            "a", transaction: "t1", purchased: jan1, expires: feb1,
            renewal: RenewalDetails(renewalProductID: ProductID.basicMonthly, signedAt: utc(2025, 1, 2)), observed: utc(2025, 1, 2))
        let crossgrade = renewalReport(
            "b", transaction: "t1", purchased: jan1, expires: feb1,
            renewal: RenewalDetails(renewalProductID: ProductID.basicYearly, signedAt: utc(2025, 1, 5)), observed: utc(2025, 1, 5))
        let priceIncrease = renewalReport(
            "c", transaction: "t1", purchased: jan1, expires: feb1,
            renewal: RenewalDetails(renewalProductID: ProductID.basicMonthly, priceIncreaseStatus: .pending, signedAt: utc(2025, 1, 6)),
            observed: utc(2025, 1, 6))
        let reason = renewalReport(
            "d", transaction: "t1", purchased: jan1, expires: feb1,
            renewal: RenewalDetails(expirationReason: .other, renewalProductID: ProductID.basicMonthly, priceIncreaseStatus: .pending, signedAt: utc(2025, 1, 7)),
            observed: utc(2025, 1, 7))
        func types(_ from: [Report], _ to: [Report]) -> [EventType] {
            EventDeriver.events(previous: resolve(from, at: now), current: resolve(to, at: now), now: now).map(\.type)
        }
        #expect(types([plain], [plain, crossgrade]) == [.renewalChanged])
        #expect(types([plain], [plain, priceIncrease]) == [.renewalChanged])
        #expect(types([plain, priceIncrease], [plain, priceIncrease, reason]) == [.updated])
        #expect(types([plain], [plain]) == [])
    }
}
