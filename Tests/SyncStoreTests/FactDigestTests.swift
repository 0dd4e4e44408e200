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

            // Renewal details (sql/0040) extend the facts only when a report has them, so the
            // digest above, of a report without, is what earlier versions stored. With them, the
            // same transaction with renewal info signed at another time is a new fact (the later
            // signature wins the subscription's details), and the same renewal info again is not.
            let renewal = RenewalDetails(
                expirationReason: .billingError, renewalProductID: "premium.yearly", priceIncreaseStatus: .pending,
                renewalDate: purchased.addingTimeInterval(30 * 86_400), signedAt: signed)
            var first = report
            first.reportID = "r2"
            first.renewal = renewal
            var again = first
            again.reportID = "r3"
            var later = first
            later.reportID = "r4"
            later.renewal?.signedAt = signed.addingTimeInterval(60)
            let accepted = try await ReportInbox(pool: pool).submit(
                accountID: "acct-digest", device: DeviceInfo(id: "d1"), reports: [first, again, later], on: connection)
            #expect(Set(accepted.accepted) == ["r2", "r4"] || Set(accepted.accepted) == ["r3", "r4"], "\(accepted)")
            let withRenewal = facts + "\u{1F}" + [
                "renewal", "billing_error", "premium.yearly", "pending", time(purchased.addingTimeInterval(30 * 86_400)), time(signed),
            ].joined(separator: "\u{1F}")
            let expectedWithRenewal = try await connection.query(
                "SELECT encode(sha256(convert_to(\(withRenewal), 'UTF8')), 'hex')")[0].decode(String.self, at: 0)
            let storedWithRenewal = try await connection.query(
                "SELECT fact_digest FROM reports WHERE account_id = 'acct-digest' AND report_id IN ('r2', 'r3')")[0].decode(String?.self, at: 0)
            #expect(storedWithRenewal == expectedWithRenewal)
            let details = try await connection.query(
                """
                SELECT has_renewal, expiration_reason, renewal_product_id, price_increase_status, renewal_signed_at
                FROM reports WHERE account_id = 'acct-digest' AND report_id = 'r4'
                """)[0]
            #expect(try details.decode(Bool.self, at: 0))
            #expect(try details.decode(String?.self, at: 1) == "billing_error")
            #expect(try details.decode(String?.self, at: 2) == "premium.yearly")
            #expect(try details.decode(String?.self, at: 3) == "pending")
            #expect(try details.decode(Date?.self, at: 4) == signed.addingTimeInterval(60))
        }
    }
}
