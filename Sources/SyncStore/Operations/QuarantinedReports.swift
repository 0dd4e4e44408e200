import Foundation
import Postgres

/// `subsync reports quarantined|retry`: reports the workers set aside after repeated failures.
public struct QuarantinedReports: Sendable {
    let pool: ConnectionPool

    public init(pool: ConnectionPool) {
        self.pool = pool
    }

    /// One quarantined report.
    public struct Line: Sendable, Codable {
        public var accountID: String
        public var reportID: String
        public var deviceID: String
        public var transactionID: String
        public var receivedAt: Date
        public var attempts: Int
        public var lastError: String?

        enum CodingKeys: String, CodingKey {
            case accountID = "account_id"
            case reportID = "report_id"
            case deviceID = "device_id"
            case transactionID = "transaction_id"
            case receivedAt = "received_at"
            case attempts
            case lastError = "last_error"
        }
    }

    /// Quarantined reports (of one account when given), oldest first, at most `limit`.
    public func list(accountID: String?, limit: Int) async throws -> [Line] {
        let rows = try await pool.preparedQuery(
            """
            SELECT account_id, report_id, device_id, transaction_id, received_at, attempts, last_error
            FROM reports
            WHERE status = 'quarantined' AND (\(accountID)::text IS NULL OR account_id = \(accountID))
            ORDER BY received_at, account_id, report_id LIMIT \(limit)
            """
        )
        return try rows.map { row in
            Line(
                accountID: try row.decode(String.self, at: 0), reportID: try row.decode(String.self, at: 1),
                deviceID: try row.decode(String.self, at: 2), transactionID: try row.decode(String.self, at: 3),
                receivedAt: try row.decode(Date.self, at: 4), attempts: try row.decode(Int.self, at: 5),
                lastError: try row.decode(String?.self, at: 6))
        }
    }

    /// Why a retry could not be done.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        case notFound(reportID: String)
        case ambiguous(reportID: String, accounts: [String])

        public var description: String {
            switch self {
            case .notFound(let id): "no quarantined report \(id)"
            case .ambiguous(let id, let accounts):
                "quarantined report \(id) exists in several accounts (\(accounts.joined(separator: ", "))): pass --account"
            }
        }
    }

    /// Puts quarantined reports back in the inbox (`pending`, attempts 0) and wakes the workers:
    /// one report (`reportID`, in `accountID` or the one account that has it quarantined), or
    /// every quarantined report (of `accountID` when given). Returns how many.
    public func retry(reportID: String?, accountID: String?) async throws -> Int {
        if let reportID, accountID == nil {
            let owners = try await pool.preparedQuery(
                """
                SELECT account_id FROM reports WHERE report_id = \(reportID) AND status = 'quarantined'
                ORDER BY account_id LIMIT 10
                """
            ).map { try $0.decode(String.self, at: 0) }
            guard let owner = owners.first else { throw Failure.notFound(reportID: reportID) }
            guard owners.count == 1 else { throw Failure.ambiguous(reportID: reportID, accounts: owners) }
            return try await retry(reportID: reportID, accountID: owner)
        }
        let count = try await pool.withTransaction { connection in
            let result = try await connection.preparedQuery(
                """
                UPDATE reports SET status = 'pending', attempts = 0, last_error = NULL
                WHERE status = 'quarantined'
                  AND (\(accountID)::text IS NULL OR account_id = \(accountID))
                  AND (\(reportID)::text IS NULL OR report_id = \(reportID))
                RETURNING account_id
                """
            )
            let accounts = try result.map { try $0.decode(String.self, at: 0) }
            try await ReportInbox.queue(accountIDs: accounts, on: connection)
            if !accounts.isEmpty { try await connection.notify(channel: ReportInbox.channel) }
            return accounts.count
        }
        if let reportID, count == 0 { throw Failure.notFound(reportID: reportID) }
        return count
    }
}
