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
        let rate = max(requestsPerSecond, 0.001)
        interval = .nanoseconds(Int64((1_000_000_000 / rate).rounded(.up)))
        self.clock = clock
    }

    /// Waits until `endpoint` may be called.
    nonisolated func acquire(_ endpoint: String) async throws {
        let wait = await reserve(endpoint)
        if wait > .zero { try await clock.sleep(for: wait) }
    }

    /// Reserves the next slot of `endpoint` and returns how long to wait for it.
    private func reserve(_ endpoint: String) -> Duration {
        let now = clock.uptime()
        let slot = max(due[endpoint] ?? now, now)
        due[endpoint] = slot + interval
        return slot - now
    }
}
