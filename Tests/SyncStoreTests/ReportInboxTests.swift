import Foundation
import Postgres
import SyncCore
@testable import SyncStore
import TestSupport
import Testing

/// The inbox stores reports as rows of a `VALUES` list up to a sync request's most reports and as
/// column arrays past it, in one statement on one PostgreSQL and as routed statements on Citus:
/// every form must store the same rows, field by field.
@Suite struct ReportInboxTests {
    /// Reports with every column varied: trust, revocation, renewal details, optional fields.
    static func variedReports(count: Int, seed: UInt64) -> [Report] {
        var generator = SeededGenerator(seed: seed)
        func pick<T>(_ values: [T]) -> T { values[Int(generator.next() % UInt64(values.count))] }
        func maybe<T>(_ value: T) -> T? { generator.next() % 2 == 0 ? value : nil }
        let base = Date(timeIntervalSince1970: 1_790_000_000.123_456)
        return (0..<count).map { index in
            let purchased = base.addingTimeInterval(Double(generator.next() % 1_000_000) + 0.000_001 * Double(generator.next() % 999_999))
            let trust: ReportTrust = pick([
                .unverifiedDevice, .verified(signedDate: purchased.addingTimeInterval(5)),
                .verified(signedDate: purchased, source: .store), .admin(pick(AdminAction.allCases), at: purchased),
            ])
            let renewal = maybe(RenewalDetails(
                expirationReason: maybe(pick(ExpirationReason.allCases)), renewalProductID: maybe("voip.business.yearly"),
                priceIncreaseStatus: maybe(pick(PriceIncreaseStatus.allCases)), renewalDate: maybe(purchased.addingTimeInterval(86_400)),
                signedAt: maybe(purchased.addingTimeInterval(60))))
            return Report(
                reportID: "r-\(index)-\(generator.next() % 1000)", deviceID: pick(["phone", "tablet", "O'Reilly's \u{1F4F1}"]),
                observedAt: purchased.addingTimeInterval(30), productID: pick(["voip.basic.monthly", "voip.premium.monthly"]),
                originalTransactionID: "t-\(index % 7)", transactionID: "t-\(index)", purchasedAt: purchased,
                expiresAt: maybe(purchased.addingTimeInterval(30 * 86_400)), gracePeriodExpiresAt: maybe(purchased.addingTimeInterval(33 * 86_400)),
                revokedAt: maybe(purchased.addingTimeInterval(3600)), revocationReason: maybe(pick(RevocationReason.allCases)),
                isUpgraded: generator.next() % 2 == 0, willAutoRenew: maybe(generator.next() % 2 == 0), inBillingRetry: generator.next() % 2 == 0,
                environment: maybe(pick(StoreEnvironment.allCases)), signedTransaction: maybe("eyJhbGciOiJFUzI1NiJ9.\(index)"),
                renewal: renewal, trust: trust)
        }
    }

    /// Every stored column of `account`'s reports, as text, by report id.
    static func storedRows(_ account: String, on connection: Connection) async throws -> [String: String] {
        var rows: [String: String] = [:]
        for row in try await connection.query(
            """
            SELECT report_id, (to_jsonb(r) - 'account_id' - 'arrival' - 'received_at' - 'status')::text
            FROM reports r WHERE account_id = \(account)
            """
        ) {
            rows[try row.decode(String.self, at: 0)] = try row.decode(String.self, at: 1)
        }
        return rows
    }

    @Test func valuesAndArraysStoreTheSameRows() async throws {
        try await withMigratedDatabase { pool, connection in
            let inbox = ReportInbox(pool: pool)
            let limit = ReportInbox.valuesRowLimit
            // The same reports under two accounts: through the submit statement, a list of `limit`
            // rows and then one of more than that (arrays), and through the insert statement.
            let reports = Self.variedReports(count: limit + 30, seed: 61)
            let first = try await inbox.submit(accountID: "listed", device: DeviceInfo(id: "phone"), reports: Array(reports.prefix(limit)))
            let rest = try await inbox.submit(accountID: "listed", device: DeviceInfo(id: "phone"), reports: reports)
            #expect(first.accepted.count == Set(reports.prefix(limit).map(\.reportID)).count)
            #expect(rest.accepted.count == Set(reports.map(\.reportID)).count - first.accepted.count)
            let arrays = try await inbox.submit(accountID: "arrays", device: DeviceInfo(id: "phone"), reports: reports)
            #expect(arrays.accepted.count == Set(reports.map(\.reportID)).count)
            for report in reports.prefix(40) {
                _ = try await inbox.insert(accountID: "one-by-one", reports: [report], on: connection)
            }
            let listed = try await Self.storedRows("listed", on: connection)
            let arrayed = try await Self.storedRows("arrays", on: connection)
            let single = try await Self.storedRows("one-by-one", on: connection)
            #expect(listed.count == Set(reports.map(\.reportID)).count)
            #expect(listed == arrayed)
            #expect(single.count == Set(reports.prefix(40).map(\.reportID)).count)
            for (id, row) in single { #expect(row == listed[id], "\(id)") }
            // The verified device reports carry their fact digest in both forms.
            let digests = try await connection.query("SELECT count(*) FROM reports WHERE fact_digest IS NOT NULL")[0].decode(Int.self, at: 0)
            #expect(digests > 0)
        }
    }

    @Test func anEmptySubmissionStoresNothingAndSeesTheDevice() async throws {
        try await withMigratedDatabase { pool, connection in
            let submission = try await ReportInbox(pool: pool).submit(accountID: "quiet", device: DeviceInfo(id: "watch"), reports: [])
            #expect(submission.accepted.isEmpty && submission.duplicates.isEmpty)
            #expect(try await connection.query("SELECT count(*) FROM devices WHERE account_id = 'quiet'")[0].decode(Int.self, at: 0) == 1)
        }
    }

    /// A sync's writes as Citus gets them (the device, the reports, the queue's entry: three
    /// statements) store what the one statement does: the same reports, device row and answers,
    /// and a claim queue entry for each submission that stored something new; the routed form
    /// also queues a retry whose reports are still pending (its first try may have failed
    /// between the reports and the entry), and not one whose reports are resolved.
    @Test func routedStatementsStoreWhatTheOneStatementDoes() async throws {
        try await withMigratedDatabase { pool, connection in
            let inbox = ReportInbox(pool: pool)
            let reports = Self.variedReports(count: 40, seed: 62)
            let seen = Date(timeIntervalSince1970: 1_790_000_000.25)
            let device = DeviceInfo(id: "phone", platform: "ios", appVersion: "2.1")
            // Some reports, then all of them (the first ones again), then all again (nothing new),
            // then none (the device is still seen).
            let submissions = [Array(reports.prefix(25)), reports, reports, []]
            var answers: [String: [ReportInbox.Submission]] = [:]
            for submitted in submissions {
                answers["one", default: []].append(
                    try await inbox.submit(accountID: "one", device: device, reports: submitted, seenAt: seen))
                answers["routed", default: []].append(try await pool.withConnection {
                    try await inbox.submitRouted(accountID: "routed", device: device, reports: submitted, seenAt: seen, on: $0)
                })
            }
            #expect(answers["one"] == answers["routed"])
            let firstIDs: Int = Set(reports.prefix(25).map(\.reportID)).count
            let allIDs: Int = Set(reports.map(\.reportID)).count
            let acceptedCounts: [Int] = answers["routed", default: []].map(\.accepted.count)
            #expect(acceptedCounts == [firstIDs, allIDs - firstIDs, 0, 0])
            let one = try await Self.storedRows("one", on: connection)
            #expect(one.count == Set(reports.map(\.reportID)).count)
            #expect(try await Self.storedRows("routed", on: connection) == one)
            func deviceRow(_ account: String) async throws -> String {
                try await connection.query(
                    "SELECT (to_jsonb(d) - 'account_id')::text FROM devices d WHERE account_id = \(account)")[0].decode(String.self, at: 0)
            }
            #expect(try await deviceRow("routed") == deviceRow("one"))
            let queued = try await connection.query(
                "SELECT account_id, count(*), min(bucket) FROM account_work GROUP BY account_id ORDER BY account_id")
            #expect(try queued.map { "\(try $0.decode(String.self, at: 0)) \(try $0.decode(Int.self, at: 1)) '\(try $0.decode(String.self, at: 2))'" }
                    == ["one 2 ''", "routed 3 ''"])
            // Resolved, a retry queues nothing.
            try await connection.query("UPDATE reports SET status = 'resolved' WHERE account_id = 'routed'")
            let retry = try await pool.withConnection {
                try await inbox.submitRouted(accountID: "routed", device: device, reports: reports, seenAt: seen, on: $0)
            }
            #expect(retry.accepted.isEmpty && retry.duplicates.count == Set(reports.map(\.reportID)).count)
            let entries = try await connection.query("SELECT count(*) FROM account_work WHERE account_id = 'routed'")[0].decode(Int.self, at: 0)
            #expect(entries == 3)
        }
    }
}
