import Logging
import Postgres

/// Wakes waiting tasks: workers when reports arrive, `wait_ms` requests when reports resolve.
///
/// A waiter remembers the generation it last saw; a signal raised since then (even while the
/// waiter was busy) makes the next ``wait(after:timeout:)`` return at once, so no wake-up is lost.
public actor WakeSignal {
    private var generation: UInt64 = 0
    private var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    private var nextWaiterID: UInt64 = 0

    public init() {}

    /// The number of signals so far.
    public var current: UInt64 { generation }

    /// Wakes every waiter.
    public func signal() {
        generation &+= 1
        let waiting = waiters
        waiters.removeAll()
        for continuation in waiting.values { continuation.resume() }
    }

    /// Returns when a signal newer than `seen` arrives, after `timeout`, or on cancellation.
    public func wait(after seen: UInt64, timeout: Duration) async {
        guard generation == seen, !Task.isCancelled else { return }
        nextWaiterID &+= 1
        let id = nextWaiterID
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            await self?.release(id)
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                waiters[id] = continuation
            }
        } onCancel: {
            Task { [weak self] in await self?.release(id) }
        }
        timer.cancel()
    }

    private func release(_ id: UInt64) {
        waiters.removeValue(forKey: id)?.resume()
    }
}

extension WakeSignal {
    /// Listens on the channels of `routes` over one dedicated connection and raises each
    /// notification's signal (once per wait, however many arrived), until the task is cancelled.
    /// A lost connection is retried every second; the short wait keeps shutdown prompt (a
    /// blocking wait cannot be cancelled).
    static func forwardNotifications(from configuration: ConnectionConfiguration, routes: [String: WakeSignal], logger: Logger) async {
        let listener = NotificationListener(configuration: configuration, channels: routes.keys.sorted(), logger: logger)
        while !Task.isCancelled {
            do {
                let channels = Set(try await listener.wait(timeout: .seconds(1)).map(\.channel))
                // Distinct signals only: two channels may raise the same one.
                var raised: [ObjectIdentifier] = []
                for channel in channels.sorted() {
                    guard let signal = routes[channel], !raised.contains(ObjectIdentifier(signal)) else { continue }
                    raised.append(ObjectIdentifier(signal))
                    await signal.signal()
                }
            } catch {
                try? await Task.sleep(for: .seconds(1))
            }
        }
        await listener.close()
    }
}

/// What one round of ``WakeSignal/drain(batchSize:pollInterval:logger:failureMessage:metadata:_:)`` did.
struct DrainRound {
    /// Items handled.
    var handled: Int
    /// Work the round set aside for a moment (an account another transaction held): look again
    /// after this, if it is sooner than the poll interval.
    var lookAgainAfter: Duration?
    /// The round knows more work is waiting (a claim smaller than a batch, with entries left
    /// behind it): go on at once, as after a full batch.
    var more: Bool

    init(handled: Int, lookAgainAfter: Duration? = nil, more: Bool = false) {
        self.handled = handled
        self.lookAgainAfter = lookAgainAfter
        self.more = more
    }
}

extension WakeSignal {
    /// Runs `round` until the task is cancelled: again at once while it reports a full batch
    /// (`batchSize` or more items) or more work waiting, otherwise once this signal is raised or `pollInterval` (or
    /// the round's shorter `lookAgainAfter`) has passed. A failed round backs off from 100 ms,
    /// doubling up to 5 s, and a success resets it.
    func drain(
        batchSize: Int,
        pollInterval: Duration,
        logger: Logger,
        failureMessage: Logger.Message,
        metadata: Logger.Metadata = [:],
        _ round: () async throws -> DrainRound
    ) async {
        var backoff = Duration.milliseconds(100)
        while !Task.isCancelled {
            let seen = current
            do {
                let done = try await round()
                backoff = .milliseconds(100)
                if done.handled >= batchSize || done.more { continue }
                await wait(after: seen, timeout: min(done.lookAgainAfter ?? pollInterval, pollInterval))
            } catch {
                logger.warning(failureMessage, metadata: metadata.merging(["error": "\(error)"]) { $1 })
                try? await Task.sleep(for: backoff)
                backoff = min(backoff * 2, .seconds(5))
            }
        }
    }
}
