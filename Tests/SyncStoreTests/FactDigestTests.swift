import Foundation
import Postgres
import SyncCore
import SyncStore
import TestSupport
import Testing

/// The stored `fact_digest` of a verified report (sql/0007: resends of the same facts are
/// duplicates) keeps its form across versions: the lowercase hex SHA-256 of the facts joined
/// by U+001F, times as seconds with six decimals. Computed here independently (PostgreSQL's
/// sha256), since digests stored by an earlier version must keep matching.
@Suite struct FactDigestTests {
    @Test func aVerifiedReportsDigestIsTheHexSHA256OfItsFacts() async throws {
        try await withMigratedDatabase { pool, connection in
            let purchased = Date(timeIntervalSince1970: 1_750_000_000.123456)
            let signed = Date(timeIntervalSince1970: 1_750_000_100.5)
            let report = Report(
                reportID: "r1", deviceID: "d1", observedAt: signed, productID: "premium.monthly",
                originalTransactionID: "2000000100", transactionID: "2000000123", purchasedAt: purchased,
                expiresAt: purchased.addingTimeInterval(30 * 86_400), willAutoRenew: true, environment: .sandbox,
                signedTransaction: "eyJhbGciOiJFUzI1NiJ9.eyJ0cmFuc2FjdGlvbklkIjoiMSJ9.c2ln",
                trust: .verified(signedDate: signed))
            _ = try await ReportInbox(pool: pool).submit(accountID: "acct-digest", device: DeviceInfo(id: "d1"), reports: [report], on: connection)

            func time(_ date: Date?) -> String { date.map { String(format: "%.6f", $0.timeIntervalSince1970) } ?? "-" }
            let facts = [
                "premium.monthly", "2000000100", "2000000123", time(purchased), time(purchased.addingTimeInterval(30 * 86_400)),
                "-", "-", "-", "0", "1", "0", "sandbox", time(signed), "eyJhbGciOiJFUzI1NiJ9.eyJ0cmFuc2FjdGlvbklkIjoiMSJ9.c2ln",
            ].joined(separator: "\u{1F}")
            let expected = try await connection.query("SELECT encode(sha256(convert_to(\(facts), 'UTF8')), 'hex')")[0].decode(String.self, at: 0)
            let stored = try await connection.query(
                "SELECT fact_digest FROM reports WHERE account_id = 'acct-digest' AND report_id = 'r1'")[0].decode(String?.self, at: 0)
            #expect(stored == expected)
            #expect(expected.count == 64)
        }
    }
}
