import Foundation
import SyncCore
import SyncStore

/// Keeps the App Store Server API calls under Apple's per-endpoint limits: every caller
/// (reconcile, backfill, the expiry questions) takes a slot here first.
///
/// Slots per endpoint are `1 / rate` apart, without bursts, so no second ever holds more than the
/// rate (Apple counts per second; a burst of a second's worth after a quiet second could pass it
/// in a sliding window). Apple's limits are per app, so with a database the schedule is shared
/// by every process of the app (``RateBuckets/reserveSlot(_:ratePerSecond:now:maximumWait:)``:
/// each `serve` and each `reconcile --against-store` takes its slots from the same row); without
/// one (a test) it is this process's alone. A caller reserves its slot and waits for it after, so
/// callers are served in the order they asked and none can take a slot twice.
actor AppStoreRateLimiter {
    private let rate: @Sendable (String) -> Double
    private let clock: any ServiceClock
    /// The schedule every process shares, and the key prefix of this app's rows in it.
    private let shared: (buckets: RateBuckets, prefix: String)?
    /// Per endpoint, when the next slot is theoretically due (on the clock's uptime), when the
    /// schedule is this process's.
    private var due: [String: Duration] = [:]

    /// One rate for every endpoint, this process's schedule.
    init(requestsPerSecond: Double, clock: any ServiceClock) {
        let rate = Self.usable(requestsPerSecond)
        self.init(rate: { _ in rate }, clock: clock, shared: nil)
    }

    /// A rate per endpoint, and the schedule shared through `shared` (`nil`: this process's).
    init(rate: @escaping @Sendable (String) -> Double, clock: any ServiceClock, shared: (buckets: RateBuckets, prefix: String)?) {
        self.rate = { Self.usable(rate($0)) }
        self.clock = clock
        self.shared = shared
    }

    /// Rates that are not numbers are one a second, not a trap.
    static func usable(_ rate: Double) -> Double {
        rate.isFinite && rate > 0 ? max(rate, 0.001) : 1
    }

    /// Waits until `endpoint` may be called; `false` (nothing reserved) when that is more than
    /// `maximumWait` away: the caller is told to come back later instead of queueing for long.
    nonisolated func acquire(_ endpoint: String, maximumWait: Duration) async throws -> Bool {
        let wait: Duration?
        if let shared {
            // On the database's clock: the schedule is one whatever the processes' clocks say.
            wait = try await shared.buckets.reserveSlot(
                shared.prefix + endpoint, ratePerSecond: rate(endpoint), now: try await shared.buckets.databaseNow(),
                maximumWait: maximumWait)
        } else {
            wait = await reserve(endpoint, maximumWait: maximumWait)
        }
        guard let wait else { return false }
        if wait > .zero { try await clock.sleep(for: wait) }
        return true
    }

    /// How long until `endpoint`'s next free slot.
    func delay(_ endpoint: String) async -> Duration {
        if let shared, let now = try? await shared.buckets.databaseNow(),
            let delay = try? await shared.buckets.slotDelay(shared.prefix + endpoint, now: now)
        {
            return delay
        }
        let now = clock.uptime()
        return max(due[endpoint] ?? now, now) - now
    }

    /// Reserves the next slot of `endpoint` in this process's schedule and returns how long to
    /// wait for it, or `nil` when that is more than `maximumWait`.
    func reserve(_ endpoint: String, maximumWait: Duration) -> Duration? {
        let now = clock.uptime()
        let slot = max(due[endpoint] ?? now, now)
        guard slot - now <= maximumWait else { return nil }
        due[endpoint] = slot + .nanoseconds(Int64((1_000_000_000 / rate(endpoint)).rounded(.up)))
        return slot - now
    }

    /// Apple answered 429 (or did not answer in time) until `wait` from now: no caller of
    /// `endpoint`, in any process sharing the schedule, asks before then.
    func pause(_ endpoint: String, for wait: Duration) async {
        let now = clock.uptime()
        due[endpoint] = max(due[endpoint] ?? now, now + wait)
        if let shared {
            let seconds = Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18
            // Best effort: this process pauses anyway; another learns of the pause from Apple.
            if let now = try? await shared.buckets.databaseNow() {
                try? await shared.buckets.pauseSlots(
                    shared.prefix + endpoint, ratePerSecond: rate(endpoint), until: now.addingTimeInterval(seconds), now: now)
            }
        }
    }
}
