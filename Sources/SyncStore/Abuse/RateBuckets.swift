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

    /// Reserves the next slot of a schedule shared by every process: slots `1 / ratePerSecond`
    /// apart with no burst, in the order the processes ask (the row lock orders them). Returns how
    /// long after `now` the reserved slot is, or `nil` (nothing reserved) when that is more than
    /// `maximumWait`.
    ///
    /// The schedule is a bucket of one token that may go into debt: a reservation takes the token
    /// whether or not it has come back, and the debt says how far ahead the slot lies.
    public func reserveSlot(_ key: String, ratePerSecond: Double, now: Date, maximumWait: Duration) async throws -> Duration? {
        let rate = Self.usableRate(ratePerSecond)
        let rows = try await pool.preparedQuery(
            """
            INSERT INTO rate_buckets AS b (key, tokens, refreshed_at, rate, burst, cost, refused)
            VALUES (\(key), 0, \(now), \(rate), 1, 1, false)
            ON CONFLICT (key) DO UPDATE SET
                tokens = \(unescaped: Self.refilled) - 1,
                -- The later of the row's time and the caller's, but never more than a minute past
                -- the caller's (a parameter: Citus refuses a timestamp plus an interval on a column
                -- in a distributed upsert), so one process whose clock runs ahead cannot stop the
                -- others from regaining slots for as long as its clock is wrong.
                refreshed_at = LEAST(GREATEST(b.refreshed_at, EXCLUDED.refreshed_at), \(now.addingTimeInterval(60))),
                rate = EXCLUDED.rate, burst = 1, cost = 1, refused = false
            WHERE \(unescaped: Self.refilled) - 1 >= \(-Self.seconds(maximumWait) * rate)
            RETURNING tokens
            """
        )
        guard let row = rows.first else { return nil }
        return Self.duration(seconds: max(0, -(try row.decode(Double.self, at: 0))) / rate)
    }

    /// Moves the shared schedule of `key` so that no slot comes before `until` (a 429's
    /// `Retry-After`, for every process).
    public func pauseSlots(_ key: String, ratePerSecond: Double, until: Date, now: Date) async throws {
        let rate = Self.usableRate(ratePerSecond)
        try await pool.preparedQuery(
            """
            INSERT INTO rate_buckets AS b (key, tokens, refreshed_at, rate, burst, cost, refused)
            VALUES (\(key), \(1 - max(0, until.timeIntervalSince(now)) * rate), \(now), \(rate), 1, 1, false)
            ON CONFLICT (key) DO UPDATE SET
                tokens = LEAST(\(unescaped: Self.refilled), EXCLUDED.tokens),
                -- Capped a minute past the caller's clock, as in reserveSlot.
                refreshed_at = LEAST(GREATEST(b.refreshed_at, EXCLUDED.refreshed_at), \(now.addingTimeInterval(60))),
                rate = EXCLUDED.rate, burst = 1, cost = 1, refused = false
            """
        )
    }

    /// The database's clock: the one clock of the shared schedules (``reserveSlot(_:ratePerSecond:now:maximumWait:)``,
    /// ``pauseSlots(_:ratePerSecond:until:now:)``), so that processes whose clocks disagree still
    /// keep one schedule (docs/STORE.md, "Rate limits").
    public func databaseNow() async throws -> Date {
        try await pool.withConnection { try await DatabaseClock.now(on: $0) }
    }

    /// How long after `now` the next free slot of `key` is (zero when one is free now).
    public func slotDelay(_ key: String, now: Date) async throws -> Duration {
        let rows = try await pool.preparedQuery("SELECT tokens, refreshed_at, rate FROM rate_buckets WHERE key = \(key)")
        guard let row = rows.first else { return .zero }
        let tokens = try row.decode(Double.self, at: 0), refreshed = try row.decode(Date.self, at: 1)
        let rate = Self.usableRate(try row.decode(Double.self, at: 2))
        let refilled = min(1, tokens + max(0, now.timeIntervalSince(refreshed)) * rate)
        return Self.duration(seconds: max(0, 1 - refilled) / rate)
    }

    /// A rate that is a positive number (anything else is one a second, not a trap).
    static func usableRate(_ rate: Double) -> Double {
        rate.isFinite && rate > 0 ? max(rate, 1e-6) : 1
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    static func duration(seconds: Double) -> Duration {
        seconds.isFinite ? .nanoseconds(Int64((min(max(seconds, 0), 1e9) * 1e9).rounded())) : .seconds(1_000_000_000)
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
