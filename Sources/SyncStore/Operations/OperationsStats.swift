import Foundation
import Postgres

/// `subsync stats`: the health of the pipeline and of webhook delivery, in one read.
public struct OperationsStats: Sendable, Codable {
    /// Reports waiting for a worker.
    public var pendingReports: Int
    /// Age in seconds of the oldest pending report (0 when none): the resolution lag.
    public var oldestPendingAgeSeconds: Double
    /// Reports set aside after repeated failures (`subsync reports quarantined`).
    public var quarantinedReports: Int
    /// Accounts by resolved tier.
    public var accountsByTier: [String: Int]
    /// Deliveries by status (`pending`, `succeeded`, `dead`, `cancelled`).
    public var deliveriesByStatus: [String: Int]
    /// Delivery attempts per endpoint within the window.
    public var endpoints: [Endpoint]
    /// The window of ``endpoints``, in seconds.
    public var windowSeconds: Double

    /// One endpoint's attempts within the window.
    public struct Endpoint: Sendable, Codable {
        public var endpointID: UUID
        public var url: String
        public var enabled: Bool
        public var attempts: Int
        public var succeeded: Int
        /// succeeded / attempts; nil without attempts.
        public var successRate: Double?
        public var averageLatencyMilliseconds: Double?
        /// Median and 99th percentile latency of the window's attempts; nil without attempts.
        public var p50LatencyMilliseconds: Double?
        public var p99LatencyMilliseconds: Double?
        /// Since when every delivery to it has failed (cleared by a success); nil when healthy.
        public var failingSince: Date?
        /// Why it was disabled, when it was (by the delivery worker or an operator).
        public var disabledReason: String?

        enum CodingKeys: String, CodingKey {
            case endpointID = "endpoint_id"
            case url, enabled, attempts, succeeded
            case successRate = "success_rate"
            case averageLatencyMilliseconds = "average_latency_ms"
            case p50LatencyMilliseconds = "p50_latency_ms"
            case p99LatencyMilliseconds = "p99_latency_ms"
            case failingSince = "failing_since"
            case disabledReason = "disabled_reason"
        }
    }

    enum CodingKeys: String, CodingKey {
        case pendingReports = "pending_reports"
        case oldestPendingAgeSeconds = "oldest_pending_age_seconds"
        case quarantinedReports = "quarantined_reports"
        case accountsByTier = "accounts_by_tier"
        case deliveriesByStatus = "deliveries_by_status"
        case endpoints
        case windowSeconds = "window_seconds"
    }

    /// Reads the statistics at `now` (the service's clock, not the database's): endpoint success
    /// rates over the `window` seconds before it, and the age of the oldest pending report.
    public static func read(pool: ConnectionPool, window: TimeInterval = 86_400, now: Date = Date()) async throws -> OperationsStats {
        // The pending and quarantined counts use their partial indexes; the rest are small
        // aggregates over state, deliveries and the window's attempts.
        let totals = try await pool.preparedQuery(
            """
            SELECT (SELECT count(*) FROM reports WHERE status = 'pending'),
                   COALESCE(EXTRACT(EPOCH FROM \(now)::timestamptz - \(unescaped: ReportInbox.oldestPendingReceivedAtSQL)), 0)::float8,
                   (SELECT count(*) FROM reports WHERE status = 'quarantined'),
                   (SELECT COALESCE(json_object_agg(tier, n), '{}')::text FROM (SELECT tier, count(*) AS n FROM account_states GROUP BY tier) t),
                   (SELECT COALESCE(json_object_agg(status, n), '{}')::text FROM (SELECT status, count(*) AS n FROM deliveries GROUP BY status) d)
            """
        )
        let row = totals[0]
        let endpoints = try await pool.preparedQuery(
            """
            SELECT w.endpoint_id, w.url, w.enabled, count(a.attempt),
                   count(a.attempt) FILTER (WHERE a.status_code BETWEEN 200 AND 299),
                   avg(a.latency_ms)::float8,
                   (percentile_cont(0.5) WITHIN GROUP (ORDER BY a.latency_ms))::float8,
                   (percentile_cont(0.99) WITHIN GROUP (ORDER BY a.latency_ms))::float8,
                   w.failing_since, w.disabled_reason
            FROM webhook_endpoints w
            LEFT JOIN deliveries d ON d.endpoint_id = w.endpoint_id
            LEFT JOIN delivery_attempts a ON a.account_id = d.account_id AND a.delivery_id = d.delivery_id
                 AND a.attempted_at >= \(now.addingTimeInterval(-window))
            GROUP BY w.endpoint_id, w.url, w.enabled, w.failing_since, w.disabled_reason
            ORDER BY w.url, w.endpoint_id
            """
        )
        return OperationsStats(
            pendingReports: try row.decode(Int.self, at: 0),
            oldestPendingAgeSeconds: try row.decode(Double.self, at: 1),
            quarantinedReports: try row.decode(Int.self, at: 2),
            accountsByTier: try row.decode(JSONColumn<[String: Int]>.self, at: 3).value,
            deliveriesByStatus: try row.decode(JSONColumn<[String: Int]>.self, at: 4).value,
            endpoints: try endpoints.map { row in
                let attempts = try row.decode(Int.self, at: 3)
                let succeeded = try row.decode(Int.self, at: 4)
                return Endpoint(
                    endpointID: try row.decode(UUID.self, at: 0), url: try row.decode(String.self, at: 1),
                    enabled: try row.decode(Bool.self, at: 2), attempts: attempts, succeeded: succeeded,
                    successRate: attempts > 0 ? Double(succeeded) / Double(attempts) : nil,
                    averageLatencyMilliseconds: try row.decode(Double?.self, at: 5),
                    p50LatencyMilliseconds: try row.decode(Double?.self, at: 6),
                    p99LatencyMilliseconds: try row.decode(Double?.self, at: 7),
                    failingSince: try row.decode(Date?.self, at: 8), disabledReason: try row.decode(String?.self, at: 9))
            },
            windowSeconds: window)
    }
}
