import Foundation
import SyncCore

extension APIError {
    /// `429 rate_limited` with `Retry-After` in whole seconds (at least 1).
    static func rateLimited(retryAfter wait: Duration, what: String) -> APIError {
        let seconds = max(1, Int(wait.timeInterval.rounded(.up)))
        return APIError(.tooManyRequests, code: "rate_limited", message: "too many requests for \(what); retry in \(seconds) s",
                        headers: [.retryAfter: String(seconds)])
    }
}

/// Token buckets keyed by a string (an account or a device): each key may spend `burst`
/// requests at once and regains `ratePerSecond` of them per second.
///
/// Buckets are kept in memory per process; several processes each apply the limit, which is
/// generous enough for devices and keeps a runaway client from flooding the inbox. Full buckets
/// are forgotten by a periodic sweep, so memory follows the number of recently active keys.
public actor RateLimiter {
    public struct Limit: Sendable, Equatable {
        public var ratePerSecond: Double
        public var burst: Double

        public init(ratePerSecond: Double, burst: Double) {
            self.ratePerSecond = ratePerSecond
            self.burst = burst
        }

        /// `SUBSYNC_RATE_LIMIT_*` form: `<requests>/<period>` with period `s` or `m`, e.g. `120/m`,
        /// optionally `,burst=N`.
        public init(parsing text: String, variable: String) throws(ConfigurationError) {
            let parts = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            let rate = parts.first?.split(separator: "/") ?? []
            guard rate.count == 2, let count = Double(rate[0]), count > 0, ["s", "m"].contains(rate[1]) else {
                throw ConfigurationError(variable: variable, message: "must look like 120/m or 5/s (optionally ,burst=N), got \"\(text)\"")
            }
            let perSecond = rate[1] == "m" ? count / 60 : count
            var burst = max(1, count / (rate[1] == "m" ? 2 : 1))
            for option in parts.dropFirst() {
                guard option.hasPrefix("burst="), let value = Double(option.dropFirst(6)), value >= 1 else {
                    throw ConfigurationError(variable: variable, message: "unknown option \"\(option)\" (expected burst=N)")
                }
                burst = value
            }
            self.init(ratePerSecond: perSecond, burst: burst)
        }
    }

    private struct Bucket {
        var tokens: Double
        var updated: Duration
    }

    public let limit: Limit
    private let clock: any ServiceClock
    private var buckets: [String: Bucket] = [:]
    private var lastSweep: Duration

    /// - Parameter clock: the service's clock; refills follow its ``ServiceClock/uptime()``.
    public init(limit: Limit, clock: any ServiceClock = SystemClock()) {
        self.limit = limit
        self.clock = clock
        self.lastSweep = clock.uptime()
    }

    /// Takes `cost` tokens (one by default) for `key`. Returns nil when allowed, or how long to
    /// wait before retrying; a refused take takes nothing.
    public func take(_ key: String, cost: Double = 1) -> Duration? {
        let now = clock.uptime()
        sweepIfDue(now)
        var bucket = buckets[key] ?? Bucket(tokens: limit.burst, updated: now)
        let elapsed = now - bucket.updated
        let seconds = max(0, elapsed.timeInterval)
        bucket.tokens = min(limit.burst, bucket.tokens + seconds * limit.ratePerSecond)
        bucket.updated = now
        if bucket.tokens >= cost {
            bucket.tokens -= cost
            buckets[key] = bucket
            return nil
        }
        buckets[key] = bucket
        let wait = (min(cost, limit.burst) - bucket.tokens) / limit.ratePerSecond
        return .milliseconds(Int((wait * 1000).rounded(.up)))
    }

    /// Forgets buckets that have refilled: they are the same as no bucket.
    private func sweepIfDue(_ now: Duration) {
        guard now - lastSweep > .seconds(30) else { return }
        lastSweep = now
        let refill = limit.burst / limit.ratePerSecond
        buckets = buckets.filter { _, bucket in
            let idle = now - bucket.updated
            return idle.timeInterval < refill
        }
    }
}
