import Foundation

/// The one source of time of subsync.
///
/// Every part that reads the clock takes one of these instead of calling `Date()`,
/// `ContinuousClock.now` or `Task.sleep` itself: resolution's `now`, the expiry sweeper, rate
/// limits, token expiry, the webhook retry schedule and leases, `wait_ms`, and the usage holds and
/// periods to come. `subsync serve` passes ``SystemClock``; tests pass a manual clock that they
/// advance by hand (`TestSupport.ManualClock`), so a test about time never depends on how fast
/// the machine is.
///
/// SyncCore's rules themselves never read a clock: they take `now` as a parameter. This protocol
/// is only the shape of the injection point that the running parts share.
public protocol ServiceClock: Sendable {
    /// The current wall-clock time: what is stored, and what store dates (expiry, grace period)
    /// are compared with.
    func now() -> Date

    /// A monotonic reading since an arbitrary origin, for intervals and deadlines (rate-limit
    /// buckets, `wait_ms`, leases): unlike ``now()`` it never jumps when the system's time is set.
    func uptime() -> Duration

    /// Suspends the calling task for `duration` of this clock's time.
    ///
    /// - Throws: `CancellationError` when the task is cancelled first.
    func sleep(for duration: Duration) async throws
}

extension ServiceClock {
    /// The time left until `deadline` (an ``uptime()`` reading), zero once it has passed.
    public func remaining(until deadline: Duration) -> Duration {
        max(.zero, deadline - uptime())
    }
}

/// The system's clocks: `Date()` for wall time, `ContinuousClock` for intervals and sleeps.
public struct SystemClock: ServiceClock {
    private static let origin = ContinuousClock.now

    public init() {}

    public func now() -> Date { Date() }

    public func uptime() -> Duration { ContinuousClock.now - Self.origin }

    public func sleep(for duration: Duration) async throws {
        try await Task.sleep(for: duration)
    }
}

extension ServiceClock where Self == SystemClock {
    /// The system's clocks.
    public static var system: SystemClock { SystemClock() }
}

extension Duration {
    /// The duration in seconds, as a `TimeInterval`.
    public var timeInterval: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
