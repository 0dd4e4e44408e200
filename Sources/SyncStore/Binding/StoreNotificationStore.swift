import Foundation
import Postgres

/// The App Store Server Notifications already handled, once per `notificationUUID`: Apple retries
/// until it gets a 200 and may deliver one notification twice.
public struct StoreNotificationStore: Sendable {
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

        public init(
            notificationUUID: UUID, type: String, subtype: String?, originalTransactionID: String?,
            signedDate: Date?, signedPayload: String?
        ) {
            self.notificationUUID = notificationUUID
            self.type = type
            self.subtype = subtype
            self.originalTransactionID = originalTransactionID
            self.signedDate = signedDate
            self.signedPayload = signedPayload
        }
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
        let query: PostgresQuery = """
            INSERT INTO store_notifications (notification_uuid, notification_type, subtype, status, account_id,
                original_transaction_id, signed_date, signed_payload)
            VALUES (\(record.notificationUUID.uuidString.lowercased())::uuid, \(record.type), \(record.subtype), \(status.rawValue),
                \(accountID), \(record.originalTransactionID), \(record.signedDate),
                \(status == .unmatched ? record.signedPayload : nil))
            ON CONFLICT (notification_uuid) DO NOTHING
            """
        let result = if let connection {
            try await connection.preparedQuery(query)
        } else {
            try await pool.preparedQuery(query)
        }
        return result.affectedRows == 1
    }
}
