import Foundation
import Postgres

/// Token buckets in PostgreSQL, shared by every `serve` process (`rate_buckets`), so a device
/// gets its limit once however many processes its requests reach.
///
/// Each bucket holds up to `burst` tokens and regains `ratePerSecond` of them per second of the
/// callers' clock. ``take(_:now:)`` asks several buckets in one statement; each bucket is taken
/// from atomically (its row is locked by the upsert), but independently of the others: a request
/// refused by one bucket may still have spent a token of another, which only makes the limits
/// slightly stricter, never looser.
public struct RateBuckets: Sendable {
    /// One bucket a request takes from.
    public struct Ask: Sendable, Equatable {
        public var key: String
        public var ratePerSecond: Double
        public var burst: Double
        public var cost: Double

        public init(key: String, ratePerSecond: Double, burst: Double, cost: Double = 1) {
            self.key = key
            self.ratePerSecond = ratePerSecond
            self.burst = burst
            self.cost = cost
        }
    }

    let pool: ConnectionPool

    public init(pool: ConnectionPool) {
        self.pool = pool
    }

    /// A stored bucket's tokens at the asking request's time: what it held plus what it regained
    /// since, at most its size (SQL of the upsert below; `b` is the row, `EXCLUDED` the request).
    private static let refilled =
        "LEAST(EXCLUDED.burst, b.tokens + GREATEST(0, EXTRACT(EPOCH FROM EXCLUDED.refreshed_at - b.refreshed_at)) * EXCLUDED.rate)"

    /// Takes `cost` tokens from each asked bucket at `now`. Returns, for each refused key, how
    /// long until it would have enough (keys not in the result were taken from). Keys must be
    /// distinct.
    public func take(_ asks: [Ask], now: Date) async throws -> [String: Duration] {
        guard !asks.isEmpty else { return [:] }
        // Rows are locked in key order, the same in every process: no deadlock between requests
        // that share buckets.
        let sorted = asks.sorted { $0.key < $1.key }
        let rows = try await pool.preparedQuery(
            """
            INSERT INTO rate_buckets AS b (key, tokens, refreshed_at, rate, burst, cost, refused)
            SELECT i.key, CASE WHEN i.burst >= i.cost THEN i.burst - i.cost ELSE i.burst END, \(now),
                   i.rate, i.burst, i.cost, i.burst < i.cost
            FROM unnest(\(sorted.map(\.key))::text[], \(sorted.map(\.ratePerSecond))::float8[],
                        \(sorted.map(\.burst))::float8[], \(sorted.map(\.cost))::float8[]) AS i(key, rate, burst, cost)
            ON CONFLICT (key) DO UPDATE SET
                tokens = \(unescaped: Self.refilled)
                    - CASE WHEN \(unescaped: Self.refilled) >= EXCLUDED.cost THEN EXCLUDED.cost ELSE 0 END,
                refused = \(unescaped: Self.refilled) < EXCLUDED.cost,
                refreshed_at = GREATEST(b.refreshed_at, EXCLUDED.refreshed_at),
                rate = EXCLUDED.rate, burst = EXCLUDED.burst, cost = EXCLUDED.cost
            RETURNING key, refused, tokens, rate, burst, cost
            """
        )
        var refused: [String: Duration] = [:]
        for row in rows where try row.decode(Bool.self, at: 1) {
            let tokens = try row.decode(Double.self, at: 2), rate = try row.decode(Double.self, at: 3)
            let burst = try row.decode(Double.self, at: 4), cost = try row.decode(Double.self, at: 5)
            let seconds = max(0, min(cost, burst) - tokens) / max(rate, 1e-9)
            refused[try row.decode(String.self, at: 0)] = .milliseconds(Int((seconds * 1000).rounded(.up)))
        }
        return refused
    }

    /// Deletes the buckets that have refilled by `now` (a full bucket is the same as none).
    /// Returns how many.
    @discardableResult
    public func forgetFull(now: Date) async throws -> Int {
        try await pool.query(
            """
            DELETE FROM rate_buckets
            -- Seconds compared as numbers, not as a timestamp plus make_interval (stable: Citus
            -- refuses it with column references in a distributed DELETE).
            WHERE LEAST((burst - tokens) / GREATEST(rate, 1e-9), 1e8) <= EXTRACT(EPOCH FROM \(now)::timestamptz - refreshed_at)
            """
        ).affectedRows
    }
}
