import Foundation
import Postgres
import PropertyBased
@testable import SyncService
import SyncCore
@testable import SyncStore
import Testing
import TestSupport

/// The answers' hand-written JSON (`AccountResponse`, `SyncResponse`: ``JSONWritable``) is the
/// bytes Foundation's `JSONEncoder.postgres` gives through their `encode(to:)`.
@Suite struct ResponseWriterTests {
    @Test func syncAnswersAreFoundationsBytes() async {
        await propertyCheck(count: 400, input: Gen.uint64()) { seed in
            var rng = SeededGenerator(seed: seed)
            let response = SyncResponse(
                accepted: Int.random(in: 0...100, using: &rng), duplicates: Int.random(in: 0...100, using: &rng),
                resolved: Bool.random(using: &rng), account: Self.account(&rng))
            let written = try? JSONWriter.encode(response)
            let foundation = try? JSONEncoder.postgres.encode(response)
            #expect(written != nil && written == foundation.map(Array.init),
                    "\(String(decoding: written ?? [], as: UTF8.self))\n\(String(decoding: foundation ?? Data(), as: UTF8.self))")
            // And what the API sends (PostgresJSONEncoder takes the writer).
            #expect((try? PostgresJSONEncoder.encode(response)) == foundation.map(Array.init))
        }
    }

    private static let texts = ["a", "", "voip.premium.monthly", "é😀", "quote \" back \\ slash /", "line\nbreak\t\u{1}", "\u{7F}\u{2028}"]

    private static func text(_ rng: inout SeededGenerator) -> String { texts.randomElement(using: &rng) ?? "" }

    private static func date(_ rng: inout SeededGenerator) -> Date {
        Date(timeIntervalSince1970: Double(Int64.random(in: 0..<4_102_444_800_000_000, using: &rng)) / 1_000_000)
    }

    /// An account as a sync answers it: a state resolved from random reports of the default
    /// catalogue's products (entitlements of every status), devices with odd text, bookkeeping.
    static func account(_ rng: inout SeededGenerator) -> AccountResponse {
        let products = Catalogue.default.products.keys.sorted()
        let now = date(&rng)
        let reports = (0..<Int.random(in: 0...6, using: &rng)).map { n in
            Report(
                reportID: "r\(n)", deviceID: "d", observedAt: now, productID: products.randomElement(using: &rng) ?? "",
                originalTransactionID: "o\(Int.random(in: 0...2, using: &rng))", transactionID: "t\(n)",
                purchasedAt: now.addingTimeInterval(-Double(Int.random(in: 0...10_000_000, using: &rng))),
                expiresAt: Bool.random(using: &rng) ? now.addingTimeInterval(Double(Int.random(in: -5_000_000...5_000_000, using: &rng))) : nil,
                revokedAt: Int.random(in: 0..<5, using: &rng) == 0 ? now : nil,
                willAutoRenew: Bool.random(using: &rng) ? Bool.random(using: &rng) : nil)
        }
        let state = Resolver.resolve(reports: reports, catalogue: .default, now: now)
        let devices = (0..<Int.random(in: 0...3, using: &rng)).map { _ in
            AccountReader.Device(
                id: text(&rng), platform: Bool.random(using: &rng) ? text(&rng) : nil,
                appVersion: Bool.random(using: &rng) ? text(&rng) : nil, firstSeenAt: date(&rng), lastSeenAt: date(&rng))
        }
        let snapshot = AccountReader.Snapshot(
            accountID: text(&rng), state: state, devices: devices, lastSequence: Int64.random(in: 0...Int64.max, using: &rng),
            resolvedAt: Bool.random(using: &rng) ? date(&rng) : nil, pendingReports: Int.random(in: 0...1_000, using: &rng))
        return AccountResponse(snapshot: snapshot, appAccountToken: Bool.random(using: &rng) ? UUID() : nil)
    }
}
