import Foundation
import NIOConcurrencyHelpers
import SyncCore

/// A clock that moves only when a test advances it.
///
/// It is both subsync's ``ServiceClock`` (wall time and sleeps of the services) and, through
/// ``continuous``, a standard `Clock` for the lower layers that take one (the connection pool's
/// lease timeout). Both views share one reading, so one ``advance(by:)`` moves every part of the
/// service at once and wakes exactly the sleepers whose deadline it passes.
///
/// Tests that need a service to be asleep before they advance (so the advance is what wakes it)
/// wait for that with ``waitForSleepers(atLeast:)``, a condition with a generous real deadline.
public final class ManualClock: ServiceClock {
    private struct Sleeper {
        let deadline: Duration
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var elapsed: Duration = .zero
        var sleepers: [UInt64: Sleeper] = [:]
        var nextID: UInt64 = 0
        var cancelled: Set<UInt64> = []
    }

    /// The wall time at which this clock started.
    public let start: Date
    private let state = NIOLockedValueBox(State())

    /// A clock reading `start` until advanced. The default is a whole second, so stored
    /// timestamps (microseconds) and JSON dates (milliseconds) compare exactly.
    public init(start: Date = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))) {
        self.start = start
    }

    public func now() -> Date {
        let elapsed = state.withLockedValue { $0.elapsed }
        return start.addingTimeInterval(elapsed.timeInterval)
    }

    public func uptime() -> Duration {
        state.withLockedValue { $0.elapsed }
    }

    /// How many tasks are asleep on this clock now.
    public var sleeperCount: Int {
        state.withLockedValue { $0.sleepers.count }
    }

    public func sleep(for duration: Duration) async throws {
        let id: UInt64 = state.withLockedValue { state in
            state.nextID &+= 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow: (any Error)?? = state.withLockedValue { state in
                    if state.cancelled.remove(id) != nil { return .some(CancellationError()) }
                    if duration <= .zero { return .some(nil) }
                    state.sleepers[id] = Sleeper(deadline: state.elapsed + duration, continuation: continuation)
                    return .none
                }
                switch resumeNow {
                case .some(.some(let error)): continuation.resume(throwing: error)
                case .some(.none): continuation.resume()
                case .none: break
                }
            }
        } onCancel: {
            let sleeper: Sleeper? = state.withLockedValue { state in
                if let sleeper = state.sleepers.removeValue(forKey: id) { return sleeper }
                // Cancelled before it registered: the registration sees this and throws.
                state.cancelled.insert(id)
                return nil
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
        state.withLockedValue { _ = $0.cancelled.remove(id) }
    }

    /// Moves time forward by `duration` and wakes every sleeper whose deadline has come, in
    /// deadline order.
    public func advance(by duration: Duration) {
        let due: [Sleeper] = state.withLockedValue { state in
            state.elapsed += max(.zero, duration)
            let now = state.elapsed
            let due = state.sleepers.filter { $0.value.deadline <= now }
            for id in due.keys { state.sleepers.removeValue(forKey: id) }
            return due.values.sorted { $0.deadline < $1.deadline }
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Waits (in real time, up to `seconds`) until at least `count` tasks sleep on this clock.
    /// Returns whether they did.
    @discardableResult
    public func waitForSleepers(atLeast count: Int, seconds: Double = 300) async -> Bool {
        await waitUntil(seconds: seconds) { self.sleeperCount >= count }
    }

    /// Waits (in real time, up to `seconds`) until a task sleeps on this clock for at least
    /// `duration` from now: a service with a long interval (the notification backfill's hour) is
    /// asleep, so that advancing by the interval is what wakes it. Other services' short sleeps
    /// do not count, as they would for ``waitForSleepers(atLeast:seconds:)``.
    @discardableResult
    public func waitForSleeper(forAtLeast duration: Duration, seconds: Double = 300) async -> Bool {
        await waitUntil(seconds: seconds) {
            self.state.withLockedValue { state in state.sleepers.values.contains { $0.deadline - state.elapsed >= duration } }
        }
    }

    /// Waits (in real time, up to `seconds`) for `condition`, moving this clock forward by `step`
    /// at each look: services with short intervals (a sweeper's 100 ms) that went to sleep after
    /// the test last advanced still wake, without the test counting sleepers it cannot tell
    /// apart. At most `seconds / 20 ms × step` of clock time passes (75 s with the defaults).
    @discardableResult
    public func advancing(by step: Duration = .milliseconds(5), seconds: Double = 300, until condition: () async throws -> Bool) async rethrows -> Bool {
        try await waitUntil(seconds: seconds) {
            if try await condition() { return true }
            self.advance(by: step)
            return false
        }
    }

    /// The same time as a standard `Clock`, for APIs that take `any Clock<Duration>`.
    public var continuous: Continuous { Continuous(clock: self) }

    /// A standard `Clock` view of a ``ManualClock``.
    public struct Continuous: Clock {
        public struct Instant: InstantProtocol {
            public var offset: Duration
            public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
            public func duration(to other: Instant) -> Duration { other.offset - offset }
            public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
        }

        let clock: ManualClock

        public var now: Instant { Instant(offset: clock.uptime()) }
        public var minimumResolution: Duration { .nanoseconds(1) }

        public func sleep(until deadline: Instant, tolerance: Duration?) async throws {
            try await clock.sleep(for: deadline.offset - clock.uptime())
        }
    }
}

/// Waits for a condition that a real process, socket or database makes true, checking every
/// 20 ms for up to `seconds` of real time. Deadlines are generous on purpose (at least ten times
/// the expected time): a test asserts what happened, and in which order, never how fast.
/// Returns whether the condition became true.
@discardableResult
public func waitUntil(seconds: Double = 300, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while true {
        if try await condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(20))
    }
}
