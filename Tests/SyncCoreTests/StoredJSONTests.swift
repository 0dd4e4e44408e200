import Foundation
import Postgres
import PropertyBased
import SyncCore
import Testing
import TestSupport

/// `PostgresJSONEncoder` writes every stored and answered domain value byte for byte as
/// Foundation's `JSONEncoder.postgres` does: states, aggregates, entitlements, events (with
/// transfers, credits and usage), usage entries and catalogues, over random report sets.
@Suite struct StoredJSONTests {
    let specs = Gen.uint64().array(of: 1...30)
    let productIndices = Gen.int(in: 0...(RandomReports.productPool.count - 1)).array(of: RandomReports.transactionCount)
    let seeds = Gen.uint64()

    @Test func domainValuesEncodeAsFoundationDoes() async throws {
        await propertyCheck(count: 200, input: specs, productIndices, seeds) { specs, indices, seed in
            var rng = SeededGenerator(seed: seed)
            // Sub-second parts, so dates carry microseconds (and fractions that round).
            let reports = RandomReports.reports(specs, products: RandomReports.products(indices)).map { report -> Report in
                var report = report
                report.observedAt += Double(Int.random(in: 0..<1_000_000_000, using: &rng)) / 1_000_000_000
                report.purchasedAt += Double(Int.random(in: 0..<1_000, using: &rng)) / 1_000_000
                return report
            }
            let aggregates = TransactionAggregate.aggregate(reports)
            var previous: AccountState?
            for (index, now) in RandomReports.probeTimes.enumerated() {
                let state = Resolver.resolve(transactions: aggregates, catalogue: .default, now: now)
                expectSameJSON(state)
                for entitlement in state.entitlements { expectSameJSON(entitlement) }
                let entries = UsageDerivation.entries(transactions: aggregates, catalogue: .default)
                expectSameJSON(entries)
                for (offset, draft) in EventDeriver.events(previous: previous, current: state, now: now).enumerated() {
                    var event = Event(
                        draft: draft, id: UUID().uuidString.lowercased(), accountID: "acct/\(seed)",
                        sequence: Int64(index * 100 + offset), occurredAt: now)
                    if Bool.random(using: &rng) {
                        event.transfer = Transfer(originalTransactionID: "o\(offset)", fromAccountID: "a \"quoted\"", toAccountID: "b\\c")
                        event.credit = CreditChange(
                            meter: "minutes", units: Int.random(in: -500...500, using: &rng), transactionID: Bool.random(using: &rng) ? "t1" : nil,
                            entryID: "e\(offset)", actor: "ops\u{1}", reason: "refund\nsecond line ✓")
                    }
                    expectSameJSON(event)
                    // With its state encoded before (as the store writes events): the same bytes.
                    do {
                        let spliced = try PostgresJSONEncoder.encode(EventWithState(event: event, state: try EncodedJSON(event.state)))
                        #expect(spliced == Array(try JSONEncoder.postgres.encode(event)))
                    } catch {
                        Issue.record("encoding an event with an encoded state failed: \(error)")
                    }
                }
                previous = state
            }
            for aggregate in aggregates { expectSameJSON(aggregate) }
            expectSameJSON(reports)
        }
    }

    @Test func catalogueEncodesAsFoundationDoes() throws {
        expectSameJSON(Catalogue.default.document)
    }
}

/// An event encoded with a state encoded before, as the store writes them.
private struct EventWithState: Encodable {
    var event: Event
    var state: EncodedJSON
    func encode(to encoder: any Encoder) throws { try event.encode(to: encoder, state: state) }
}

/// Compares the two encoders' bytes for `value`.
func expectSameJSON<T: Encodable>(_ value: T, sourceLocation: SourceLocation = #_sourceLocation) {
    do {
        let expected = String(decoding: try JSONEncoder.postgres.encode(value), as: UTF8.self)
        let actual = try PostgresJSONEncoder.string(value)
        #expect(actual == expected, "\(T.self)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("encoding \(T.self) failed: \(error)", sourceLocation: sourceLocation)
    }
}
