import Foundation
import SyncCore

/// Keeps one process's App Store Server API calls under Apple's per-endpoint limits: every
/// caller (reconcile, backfill, the sweeper's questions) takes a slot here first.
///
/// Slots per endpoint are `1 / rate` apart, without bursts, so no second ever holds more than the
/// rate (Apple counts per second; a burst of a second's worth after a quiet second could pass it
/// in a sliding window). A caller reserves its slot inside the actor and waits for it outside, so
/// callers are served in the order they asked and none can take a slot twice.
actor AppStoreRateLimiter {
    private let interval: Duration
    private let clock: any ServiceClock
    /// Per endpoint, when the next slot is theoretically due (on the clock's uptime).
    private var due: [String: Duration] = [:]

    init(requestsPerSecond: Double, clock: any ServiceClock) {
        let rate = requestsPerSecond.isFinite && requestsPerSecond > 0 ? max(requestsPerSecond, 0.001) : 1
        interval = .nanoseconds(Int64((1_000_000_000 / rate).rounded(.up)))
        self.clock = clock
    }

    /// Waits until `endpoint` may be called; `false` (nothing reserved) when that is more than
    /// `maximumWait` away: the caller is told to come back later instead of queueing for long.
    nonisolated func acquire(_ endpoint: String, maximumWait: Duration) async throws -> Bool {
        guard let wait = await reserve(endpoint, maximumWait: maximumWait) else { return false }
        if wait > .zero { try await clock.sleep(for: wait) }
        return true
    }

    /// How long until `endpoint`'s next free slot.
    func delay(_ endpoint: String) -> Duration {
        let now = clock.uptime()
        return max(due[endpoint] ?? now, now) - now
    }

    /// Reserves the next slot of `endpoint` and returns how long to wait for it, or `nil` when
    /// that is more than `maximumWait`.
    func reserve(_ endpoint: String, maximumWait: Duration) -> Duration? {
        let now = clock.uptime()
        let slot = max(due[endpoint] ?? now, now)
        guard slot - now <= maximumWait else { return nil }
        due[endpoint] = slot + interval
        return slot - now
    }

    /// Apple answered 429 until `wait` from now: no caller of `endpoint` in this process asks
    /// before then.
    func pause(_ endpoint: String, for wait: Duration) {
        let now = clock.uptime()
        due[endpoint] = max(due[endpoint] ?? now, now + wait)
    }
}
