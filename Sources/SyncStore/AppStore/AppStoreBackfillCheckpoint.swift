import Foundation
import Postgres

/// The checkpoint and lease of a backfill from the App Store (`store_backfill`, sql/0038;
/// docs/STORE.md "Backfill"): which process runs it now, and up to when it has asked.
public struct AppStoreBackfillCheckpoint: Sendable {
    let pool: ConnectionPool
    /// The backfill's row.
    public let name: String

    public init(pool: ConnectionPool, name: String = "notifications") {
        self.pool = pool
        self.name = name
    }

    /// The backfill's row as read by ``lease(owner:now:duration:)``.
    public struct State: Sendable, Equatable {
        /// Up to when every notification was asked for; `nil` before the first complete run.
        public var checkpoint: Date?
        public var notifications: Int
    }

    /// Takes (or renews) the lease for `owner` until `now + duration` when it is free, expired or
    /// already `owner`'s; returns the state, or `nil` when another process holds it.
    public func lease(owner: String, now: Date, duration: TimeInterval) async throws -> State? {
        let rows = try await pool.preparedQuery(
            """
            INSERT INTO store_backfill (name, lease_owner, lease_until) VALUES (\(name), \(owner), \(now.addingTimeInterval(duration)))
            ON CONFLICT (name) DO UPDATE SET lease_owner = EXCLUDED.lease_owner, lease_until = EXCLUDED.lease_until
            WHERE store_backfill.lease_owner IS NULL OR store_backfill.lease_owner = EXCLUDED.lease_owner
               OR store_backfill.lease_until IS NULL OR store_backfill.lease_until < \(now)
            RETURNING checkpoint, notifications
            """
        )
        return try rows.first.map { State(checkpoint: try $0.decode(Date?.self, at: 0), notifications: Int(try $0.decode(Int64.self, at: 1))) }
    }

    /// Records a complete run by `owner` up to `checkpoint` (never moving it back) with the
    /// notifications it handed on; `false` when `owner` no longer holds the lease (nothing written).
    @discardableResult
    public func advance(owner: String, to checkpoint: Date, notifications: Int, now: Date) async throws -> Bool {
        try await pool.preparedQuery(
            """
            UPDATE store_backfill SET checkpoint = GREATEST(checkpoint, \(checkpoint)), last_run_at = \(now), last_error = NULL,
                notifications = notifications + \(Int64(notifications))
            WHERE name = \(name) AND lease_owner = \(owner)
            RETURNING 1
            """
        ).count == 1
    }

    /// Records a run that failed (the checkpoint stays), for `subsync` and the console to show.
    public func failed(owner: String, error: String, now: Date) async throws {
        try await pool.preparedQuery(
            """
            UPDATE store_backfill SET last_run_at = \(now), last_error = \(String(error.prefix(500)))
            WHERE name = \(name) AND lease_owner = \(owner)
            """
        )
    }

    /// Gives the lease up (a process stopping), so another may run the next backfill at once.
    public func release(owner: String) async throws {
        try await pool.preparedQuery(
            "UPDATE store_backfill SET lease_owner = NULL, lease_until = NULL WHERE name = \(name) AND lease_owner = \(owner)")
    }
}
