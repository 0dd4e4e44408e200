import Foundation
import Logging
import Metrics
import Postgres
import ServiceLifecycle
import SyncStore

/// Resolution workers: each claims a batch of pending reports, resolves their accounts and
/// commits state, events and deliveries in one transaction (``ResolutionEngine``).
///
/// Workers wake on NOTIFY (`arrivals`, raised by the process's one listening connection, a
/// ``NotificationForwarder`` outside the pool), on a signal from this process's sync handler,
/// and at least every `pollInterval` as a fallback, since notifications sent while the listener
/// reconnects are lost. A worker whose batch was full, or whose claim left entries behind it,
/// goes straight on to the next: near the end of a backlog each claim takes this worker's share
/// of what is left rather than a full batch (``ResolutionEngine/resolvePendingBatch(limit:sharedBy:maximumAttempts:)``),
/// so the workers finish it together. On graceful shutdown, batches in flight finish and commit.
public struct WorkerPool: Service {
    let engine: ResolutionEngine
    let workers: Int
    let batchSize: Int
    let pollInterval: Duration
    /// Raised when reports arrive.
    let arrivals: WakeSignal
    /// Raised after every committed batch that resolved something.
    let resolutions: WakeSignal
    let logger: Logger

    public init(
        engine: ResolutionEngine,
        workers: Int,
        batchSize: Int,
        pollInterval: Duration,
        arrivals: WakeSignal,
        resolutions: WakeSignal,
        logger: Logger
    ) {
        self.engine = engine
        self.workers = workers
        self.batchSize = batchSize
        self.pollInterval = pollInterval
        self.arrivals = arrivals
        self.resolutions = resolutions
        self.logger = logger
    }

    public func run() async throws {
        // A service that returns ends the whole group: with no workers, wait for the shutdown.
        guard workers > 0 else {
            try? await gracefulShutdown()
            return
        }
        logger.info("resolution workers starting", metadata: ["workers": "\(workers)", "batch": "\(batchSize)"])
        await cancelWhenGracefulShutdown {
            // A fixed set of children that return nothing: a plain task group holds no results
            // worth discarding (and the discarding one needs macOS 14, above the package's floor).
            await withTaskGroup(of: Void.self) { group in
                for index in 0..<workers {
                    group.addTask { await work(index) }
                }
                await group.waitForAll()
            }
        }
        logger.info("resolution workers stopped")
    }

    private func work(_ index: Int) async {
        await arrivals.drain(
            batchSize: batchSize, pollInterval: pollInterval, logger: logger,
            failureMessage: "resolution batch failed; backing off", metadata: ["worker": "\(index)"]
        ) {
            let started = ContinuousClock.now
            let outcome = try await engine.resolvePendingBatch(limit: batchSize, sharedBy: workers)
            // A claim near the end of a backlog takes a share of what is left, less than a batch:
            // with entries left behind it, go on at once all the same.
            let more = outcome.queuedAfter > 0
            if outcome.reportsResolved > 0 {
                ServiceMetrics.batchDuration.recordInterval(since: started)
                ServiceMetrics.batchSize.record(outcome.reportsResolved)
                ServiceMetrics.reportsResolved.increment(by: outcome.reportsResolved)
                ServiceMetrics.eventsWritten.increment(by: outcome.eventsWritten)
                await resolutions.signal()
            }
            if outcome.accountsFailed > 0 {
                ServiceMetrics.accountsFailed.increment(by: outcome.accountsFailed)
            }
            guard outcome.accountsDeferred > 0 else { return DrainRound(handled: outcome.reportsResolved, more: more) }
            ServiceMetrics.accountsDeferred.increment(by: outcome.accountsDeferred)
            // Accounts another transaction held were queued again: look again shortly (the
            // holder is usually another batch, about 0.1 s) rather than at the next poll.
            return DrainRound(handled: outcome.reportsResolved, lookAgainAfter: .milliseconds(50), more: more)
        }
    }
}

extension Metrics.Timer {
    func recordInterval(since start: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - start
        recordNanoseconds(elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
    }
}
