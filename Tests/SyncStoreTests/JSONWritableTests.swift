import Foundation
import Postgres
import PropertyBased
@testable import SyncCore
import SyncStore
import Testing
import TestSupport

/// The hand-written JSON of the stored domain types (``JSONWritable``, SyncStore/JSON) is byte
/// for byte what Foundation's `JSONEncoder.postgres` writes from their `Encodable`
/// conformances, over the whole input space of each type: every optional present or absent,
/// strings that need escaping, dates with and without sub-microsecond parts, limits of any name.
@Suite struct JSONWritableTests {
    @Test func writersMatchFoundation() async {
        await propertyCheck(count: 500, input: Gen.uint64()) { seed in
            var rng = SeededGenerator(seed: seed)
            let state = Self.accountState(&rng)
            Self.expectSame(state)
            for entitlement in state.entitlements { Self.expectSame(entitlement) }
            Self.expectSame(Self.aggregate(&rng))
            Self.expectSame(Self.event(&rng, state: state))
        }
    }

    /// A value that embeds writable ones and is not writable itself goes through the generic
    /// encoder, which hands each embedded value to its writer: the same bytes again.
    @Test func embeddedWritersMatchFoundation() async {
        await propertyCheck(count: 200, input: Gen.uint64()) { seed in
            var rng = SeededGenerator(seed: seed)
            let envelope = Envelope(
                state: Self.accountState(&rng), aggregates: (0..<Int.random(in: 0...3, using: &rng)).map { _ in Self.aggregate(&rng) },
                note: Self.text(&rng))
            let expected = try? JSONEncoder.postgres.encode(envelope)
            let actual = try? PostgresJSONEncoder.encode(envelope)
            #expect(actual != nil && expected.map(Array.init) == actual)
        }
    }

    private struct Envelope: Encodable {
        var state: AccountState
        var aggregates: [TransactionAggregate]
        var note: String
    }

    static func expectSame<T: JSONWritable>(_ value: T, sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            let expected = String(decoding: try JSONEncoder.postgres.encode(value), as: UTF8.self)
            let written = String(decoding: try JSONWriter.encode(value), as: UTF8.self)
            let encoded = try PostgresJSONEncoder.string(value)
            #expect(written == expected, "\(T.self)", sourceLocation: sourceLocation)
            #expect(encoded == expected, "\(T.self) through PostgresJSONEncoder", sourceLocation: sourceLocation)
        } catch {
            Issue.record("encoding \(T.self) failed: \(error)", sourceLocation: sourceLocation)
        }
    }

    // MARK: - Generated values

    static let texts = ["", "a", "premium", "quote\"d", "back\\slash", "new\nline\ttab", "\u{1}\u{1f}", "✓ ünïcode", "a/b", "Z", "aa"]

    static func text(_ rng: inout SeededGenerator) -> String {
        texts[Int.random(in: 0..<texts.count, using: &rng)] + (Bool.random(using: &rng) ? String(Int.random(in: 0...999, using: &rng)) : "")
    }

    static func date(_ rng: inout SeededGenerator) -> Date {
        // Whole seconds, microseconds, and fractions below a microsecond (which round).
        let seconds = Double(Int.random(in: -2_000_000_000...4_000_000_000, using: &rng))
        switch Int.random(in: 0..<3, using: &rng) {
        case 0: return Date(timeIntervalSince1970: seconds)
        case 1: return Date(timeIntervalSince1970: seconds + Double(Int.random(in: 0..<1_000_000, using: &rng)) / 1_000_000)
        default: return Date(timeIntervalSince1970: seconds + Double.random(in: 0..<1, using: &rng))
        }
    }

    static func maybe<T>(_ rng: inout SeededGenerator, _ make: (inout SeededGenerator) -> T) -> T? {
        Bool.random(using: &rng) ? make(&rng) : nil
    }

    static func pick<T: CaseIterable>(_ rng: inout SeededGenerator, _ type: T.Type) -> T {
        let all = Array(T.allCases)
        return all[Int.random(in: 0..<all.count, using: &rng)]
    }

    static func entitlement(_ rng: inout SeededGenerator) -> EntitlementState {
        EntitlementState(
            id: text(&rng), tier: text(&rng), status: pick(&rng, EntitlementStatus.self), productID: text(&rng),
            productKind: pick(&rng, ProductKind.self), sourceTransactionID: text(&rng), originalTransactionID: text(&rng),
            purchasedAt: date(&rng), expiresAt: maybe(&rng, date), periodEndsAt: maybe(&rng, date),
            gracePeriodExpiresAt: maybe(&rng, date), willRenew: Bool.random(using: &rng), revokedAt: maybe(&rng, date),
            revocationReason: maybe(&rng) { pick(&$0, RevocationReason.self) },
            expirationReason: maybe(&rng) { pick(&$0, ExpirationReason.self) }, renewalProductID: maybe(&rng, text),
            priceIncreaseStatus: maybe(&rng) { pick(&$0, PriceIncreaseStatus.self) }, renewalDate: maybe(&rng, date))
    }

    static func renewal(_ rng: inout SeededGenerator) -> RenewalMark {
        RenewalMark(
            details: RenewalDetails(
                expirationReason: maybe(&rng) { pick(&$0, ExpirationReason.self) }, renewalProductID: maybe(&rng, text),
                priceIncreaseStatus: maybe(&rng) { pick(&$0, PriceIncreaseStatus.self) }, renewalDate: maybe(&rng, date),
                signedAt: maybe(&rng, date)),
            sourceReport: orderKey(&rng))
    }

    static func accountState(_ rng: inout SeededGenerator) -> AccountState {
        var limits: [String: LimitValue] = [:]
        for _ in 0..<Int.random(in: 0...4, using: &rng) {
            limits[text(&rng)] = Bool.random(using: &rng) ? .unlimited : .limited(Int.random(in: -1_000...Int.max, using: &rng))
        }
        return AccountState(
            tier: text(&rng), features: (0..<Int.random(in: 0...4, using: &rng)).map { _ in text(&rng) }, limits: limits,
            ads: Bool.random(using: &rng), entitlements: (0..<Int.random(in: 0...3, using: &rng)).map { _ in entitlement(&rng) },
            nextTransitionAt: maybe(&rng, date))
    }

    static func orderKey(_ rng: inout SeededGenerator) -> ReportOrderKey {
        ReportOrderKey(isVerified: Bool.random(using: &rng), signedDate: maybe(&rng, date), observedAt: date(&rng), reportID: text(&rng))
    }

    static func aggregate(_ rng: inout SeededGenerator) -> TransactionAggregate {
        let report = Report(
            reportID: text(&rng), deviceID: text(&rng), observedAt: date(&rng), productID: text(&rng),
            originalTransactionID: text(&rng), transactionID: text(&rng), purchasedAt: date(&rng),
            expiresAt: maybe(&rng, date), gracePeriodExpiresAt: maybe(&rng, date), revokedAt: nil, revocationReason: nil,
            isUpgraded: Bool.random(using: &rng), willAutoRenew: maybe(&rng) { Bool.random(using: &$0) },
            inBillingRetry: Bool.random(using: &rng), environment: maybe(&rng) { pick(&$0, StoreEnvironment.self) },
            signedTransaction: nil, trust: .unverifiedDevice)
        var aggregate = TransactionAggregate(report)
        aggregate.representative = orderKey(&rng)
        aggregate.lastObservedAt = date(&rng)
        aggregate.storeReinstatedAt = maybe(&rng, date)
        aggregate.storeRevocation = maybe(&rng, revocation)
        aggregate.operatorReinstatedAt = maybe(&rng, date)
        // Both come from an operator's unrevoke: one is there exactly when the other is.
        aggregate.operatorLiftsStoreBefore = aggregate.operatorReinstatedAt.map { _ in date(&rng) }
        aggregate.operatorRevocation = maybe(&rng, revocation)
        aggregate.renewal = maybe(&rng, renewal)
        return aggregate
    }

    static func revocation(_ rng: inout SeededGenerator) -> RevocationMark {
        RevocationMark(revokedAt: date(&rng), reason: maybe(&rng) { pick(&$0, RevocationReason.self) }, sourceReport: orderKey(&rng))
    }

    static func event(_ rng: inout SeededGenerator, state: AccountState) -> Event {
        var event = Event(
            id: text(&rng), accountID: text(&rng), sequence: Int64.random(in: 1...Int64.max, using: &rng),
            type: pick(&rng, EventType.self), occurredAt: date(&rng), entitlementID: maybe(&rng, text),
            previous: maybe(&rng, entitlement), current: maybe(&rng, entitlement), previousTier: maybe(&rng, text), state: state)
        event.transfer = maybe(&rng) { rng in Transfer(originalTransactionID: text(&rng), fromAccountID: text(&rng), toAccountID: text(&rng)) }
        event.credit = maybe(&rng) { rng in
            CreditChange(
                meter: text(&rng), units: Int.random(in: -500...500, using: &rng), source: [CreditChange.Source.consumable, .reward, .adjustment][Int.random(in: 0..<3, using: &rng)],
                transactionID: maybe(&rng, text), entryID: text(&rng), actor: maybe(&rng, text), reason: maybe(&rng, text))
        }
        event.usage = maybe(&rng) { rng in usage(&rng) }
        return event
    }

    /// A usage snapshot (written by the generic encoder inside an event's writer).
    static func usage(_ rng: inout SeededGenerator) -> UsageSnapshot {
        let meters = Catalogue.default.meters
        let period = UsageBalance.Period(
            start: date(&rng), end: date(&rng), allowance: Bool.random(using: &rng) ? .unlimited : .limited(Int.random(in: 0...10_000, using: &rng)),
            used: Int.random(in: 0...10_000, using: &rng), fromAllowance: Int.random(in: 0...100, using: &rng),
            fromRewards: Int.random(in: 0...100, using: &rng), fromCredits: Int.random(in: 0...100, using: &rng),
            overage: Int.random(in: 0...100, using: &rng))
        var snapshot = UsageSnapshot(period: period, meter: meters[Int.random(in: 0..<meters.count, using: &rng)], currency: maybe(&rng, text))
        snapshot.available = maybe(&rng) { Int.random(in: -100...100, using: &$0) }
        snapshot.rewards = maybe(&rng) { Int.random(in: 0...100, using: &$0) }
        snapshot.credits = maybe(&rng) { Int.random(in: 0...100, using: &$0) }
        snapshot.threshold = maybe(&rng) { Int.random(in: 0...100, using: &$0) }
        snapshot.revision = maybe(&rng) { Int.random(in: 0...100, using: &$0) }
        return snapshot
    }
}
