import Foundation
import Postgres
import SyncCore

/// The App Store Server Notifications already handled, once per `notificationUUID`: Apple retries
/// until it gets a 200 and may deliver one notification twice.
public struct AppStoreNotificationStore: Sendable {
    let pool: ConnectionPool

    public init(pool: ConnectionPool) {
        self.pool = pool
    }

    /// What became of a notification.
    public enum Status: String, Sendable {
        /// Its report was stored for an account.
        case applied
        /// No account is known for its purchase yet; the signed payload is kept.
        case unmatched
        /// Nothing to apply (e.g. `TEST`, or a notification without a transaction).
        case ignored
    }

    /// One handled notification.
    public struct Record: Sendable {
        public var notificationUUID: UUID
        public var type: String
        public var subtype: String?
        public var originalTransactionID: String?
        public var signedDate: Date?
        /// Kept for unmatched notifications only.
        public var signedPayload: String?
        /// The verified report the notification makes; kept for unmatched notifications, to be
        /// stored when the purchase is bound (``TransactionBinder``).
        public var report: Report?

        public init(
            notificationUUID: UUID, type: String, subtype: String?, originalTransactionID: String?,
            signedDate: Date?, signedPayload: String?, report: Report? = nil
        ) {
            self.notificationUUID = notificationUUID
            self.type = type
            self.subtype = subtype
            self.originalTransactionID = originalTransactionID
            self.signedDate = signedDate
            self.signedPayload = signedPayload
            self.report = report
        }
    }

    /// A kept report with its trust and its renewal details (with their signing time), which
    /// ``Report``'s own wire coding leaves out on purpose. Rows kept before renewal details were
    /// (sql/0040) have no `renewal`.
    struct KeptReport: Codable {
        var report: Report
        var trust: ReportTrust
        var renewal: RenewalDetails?
    }

    /// Whether the notification was handled already (a cheap check before verifying its parts).
    public func contains(_ notificationUUID: UUID) async throws -> Bool {
        let rows = try await pool.preparedQuery(
            "SELECT 1 FROM store_notifications WHERE notification_uuid = \(notificationUUID.uuidString.lowercased())::uuid"
        )
        return !rows.isEmpty
    }

    /// Records `record`; `false` when it was recorded before (a duplicate, to acknowledge and
    /// ignore). Inside the caller's transaction when `connection` is given.
    public func insert(_ record: Record, status: Status, accountID: String?, on connection: Connection? = nil) async throws -> Bool {
        var kept: String?
        if status == .unmatched, let report = record.report {
            kept = String(decoding: try JSONEncoder().encode(KeptReport(report: report, trust: report.trust, renewal: report.renewal)), as: UTF8.self)
        }
        let query: PostgresQuery = """
            INSERT INTO store_notifications (notification_uuid, notification_type, subtype, status, account_id,
                original_transaction_id, signed_date, signed_payload, report)
            VALUES (\(record.notificationUUID.uuidString.lowercased())::uuid, \(record.type), \(record.subtype), \(status.rawValue),
                \(accountID), \(record.originalTransactionID), \(record.signedDate),
                \(status == .unmatched ? record.signedPayload : nil), \(kept)::jsonb)
            ON CONFLICT (notification_uuid) DO NOTHING
            """
        let result = if let connection {
            try await connection.preparedQuery(query)
        } else {
            try await pool.preparedQuery(query)
        }
        return result.affectedRows == 1
    }

    /// Names `accountID` as the account of the recorded notification `notificationUUID` (its
    /// purchase turned out to belong to that account), inside the caller's transaction.
    public func assign(_ notificationUUID: UUID, to accountID: String, on connection: Connection) async throws {
        try await connection.preparedQuery(
            "UPDATE store_notifications SET account_id = \(accountID) WHERE notification_uuid = \(notificationUUID.uuidString.lowercased())::uuid"
        )
    }

    /// Marks the unmatched notifications of `purchases` applied to `accountID` and returns the
    /// reports they kept, in the order the notifications arrived, inside the binding transaction.
    func takeUnmatched(purchases: [String], for accountID: String, on connection: Connection) async throws -> [Report] {
        guard !purchases.isEmpty else { return [] }
        let rows = try await connection.preparedQuery(
            """
            WITH taken AS (
                UPDATE store_notifications SET status = 'applied', account_id = \(accountID)
                WHERE status = 'unmatched' AND original_transaction_id = ANY(\(purchases)::text[]) AND report IS NOT NULL
                RETURNING received_at, report::text
            )
            SELECT report FROM taken ORDER BY received_at
            """
        )
        return try rows.map { row in
            let kept = try JSONDecoder().decode(KeptReport.self, from: Data(try row.decode(String.self, at: 0).utf8))
            var report = kept.report
            report.trust = kept.trust
            report.renewal = kept.renewal
            return report
        }
    }
}
