import Foundation
import Postgres

/// `subsync events list` and the recent events of `accounts show`: stored events with the
/// status of their deliveries.
public struct EventLog: Sendable {
    let pool: ConnectionPool

    public init(pool: ConnectionPool) {
        self.pool = pool
    }

    /// One event, without its payload.
    public struct Line: Sendable, Codable {
        public var accountID: String
        public var sequence: Int64
        public var eventID: UUID
        public var type: String
        /// worker, sweeper, reconcile, admin or store.
        public var origin: String
        public var occurredAt: Date
        public var entitlementID: String?
        /// Deliveries of this event by status (`pending`, `succeeded`, `dead`, `cancelled`).
        public var deliveries: [String: Int]

        enum CodingKeys: String, CodingKey {
            case accountID = "account_id"
            case sequence
            case eventID = "event_id"
            case type, origin
            case occurredAt = "occurred_at"
            case entitlementID = "entitlement_id"
            case deliveries
        }
    }

    /// Events, newest first (by time; by sequence within an account), filtered by what is given.
    public func list(accountID: String? = nil, type: String? = nil, since: Date? = nil, limit: Int) async throws -> [Line] {
        let rows = try await pool.preparedQuery(
            """
            SELECT e.account_id, e.sequence, e.event_id, e.type, e.origin, e.occurred_at, e.payload->>'entitlement_id',
                   (SELECT COALESCE(json_object_agg(s.status, s.n), '{}')::text FROM (
                        SELECT d.status, count(*) AS n FROM deliveries d
                        WHERE d.account_id = e.account_id AND d.event_sequence = e.sequence GROUP BY d.status) AS s)
            FROM events e
            WHERE (\(accountID)::text IS NULL OR e.account_id = \(accountID))
              AND (\(type)::text IS NULL OR e.type = \(type))
              AND (\(since)::timestamptz IS NULL OR e.occurred_at >= \(since))
            ORDER BY e.occurred_at DESC, e.account_id, e.sequence DESC
            LIMIT \(limit)
            """
        )
        return try rows.map { row in
            Line(
                accountID: try row.decode(String.self, at: 0), sequence: try row.decode(Int64.self, at: 1),
                eventID: try row.decode(UUID.self, at: 2), type: try row.decode(String.self, at: 3),
                origin: try row.decode(String.self, at: 4), occurredAt: try row.decode(Date.self, at: 5),
                entitlementID: try row.decode(String?.self, at: 6),
                deliveries: try row.decode(JSONColumn<[String: Int]>.self, at: 7).value)
        }
    }
}
