import Foundation
import Postgres

/// What operators read of deliveries beyond ``DeliveryStore/list(status:endpoint:limit:)``: one
/// delivery by id, and an account's deliveries with every attempt (the console's timeline).
extension DeliveryStore {
    /// One attempt to deliver, as recorded in `delivery_attempts`.
    public struct Attempt: Sendable, Codable, Equatable {
        public var attempt: Int
        public var attemptedAt: Date
        public var statusCode: Int?
        public var latencyMilliseconds: Int?
        public var error: String?

        enum CodingKeys: String, CodingKey {
            case attempt
            case attemptedAt = "attempted_at"
            case statusCode = "status_code"
            case latencyMilliseconds = "latency_ms"
            case error
        }
    }

    /// A delivery of an account's event, with its endpoint's URL and its attempts (oldest first).
    public struct AccountDelivery: Sendable, Codable, Equatable {
        public var delivery: Summary
        public var endpointURL: String
        public var completedAt: Date?
        public var attempts: [Attempt]

        enum CodingKeys: String, CodingKey {
            case delivery
            case endpointURL = "endpoint_url"
            case completedAt = "completed_at"
            case attempts
        }
    }

    /// The delivery with this id, if any.
    public func summary(deliveryID: Int64) async throws -> Summary? {
        let rows = try await pool.preparedQuery(
            """
            SELECT d.account_id, d.delivery_id, d.endpoint_id, d.event_id, d.event_sequence, e.type, d.status, d.attempts,
                   d.next_attempt_at, d.last_status_code, d.last_error, d.created_at
            FROM deliveries d JOIN events e ON e.account_id = d.account_id AND e.sequence = d.event_sequence
            WHERE d.delivery_id = \(deliveryID)
            LIMIT 1
            """
        )
        return try rows.first.map(Self.summary(from:))
    }

    /// The account's latest `limit` deliveries (by creation), oldest first, each with its attempts.
    public func deliveries(ofAccount accountID: String, limit: Int = 200) async throws -> [AccountDelivery] {
        let rows = try await pool.preparedQuery(
            """
            SELECT d.account_id, d.delivery_id, d.endpoint_id, d.event_id, d.event_sequence, e.type, d.status, d.attempts,
                   d.next_attempt_at, d.last_status_code, d.last_error, d.created_at, w.url, d.completed_at,
                   (SELECT COALESCE(json_agg(json_build_object(
                               'attempt', a.attempt, 'attempted_at', a.attempted_at, 'status_code', a.status_code,
                               'latency_ms', a.latency_ms, 'error', a.error) ORDER BY a.attempt), '[]')::text
                    FROM delivery_attempts a WHERE a.account_id = d.account_id AND a.delivery_id = d.delivery_id)
            FROM deliveries d
            JOIN events e ON e.account_id = d.account_id AND e.sequence = d.event_sequence
            LEFT JOIN webhook_endpoints w ON w.endpoint_id = d.endpoint_id
            WHERE d.account_id = \(accountID)
            ORDER BY d.created_at DESC, d.delivery_id DESC
            LIMIT \(limit)
            """
        )
        return try rows.reversed().map { row in
            AccountDelivery(
                delivery: try Self.summary(from: row), endpointURL: try row.decode(String?.self, at: 12) ?? "(deleted endpoint)",
                completedAt: try row.decode(Date?.self, at: 13),
                attempts: try row.decode(JSONColumn<[Attempt]>.self, at: 14).value)
        }
    }

    /// A ``Summary`` from the first twelve columns of a row, in the order `list` selects them.
    static func summary(from row: Row) throws -> Summary {
        Summary(
            accountID: try row.decode(String.self, at: 0),
            deliveryID: try row.decode(Int64.self, at: 1),
            endpointID: try row.decode(UUID.self, at: 2),
            eventID: try row.decode(UUID.self, at: 3),
            eventSequence: try row.decode(Int64.self, at: 4),
            eventType: try row.decode(String.self, at: 5),
            status: try row.decode(String.self, at: 6),
            attempts: try row.decode(Int.self, at: 7),
            nextAttemptAt: try row.decode(Date.self, at: 8),
            lastStatusCode: try row.decode(Int?.self, at: 9),
            lastError: try row.decode(String?.self, at: 10),
            createdAt: try row.decode(Date.self, at: 11)
        )
    }
}
