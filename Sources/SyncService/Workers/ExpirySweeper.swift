import Logging
import ServiceLifecycle
import SyncCore
import SyncStore

/// Time alone changes state: a subscription expires, a grace period ends. Every `interval` the
/// sweeper re-resolves the accounts whose `next_transition_at` has passed and writes the events
/// (`entitlement.expired`, grace and billing transitions). Several processes can sweep at once:
/// due accounts are locked one by one with `SKIP LOCKED`. It also re-queues accounts whose
/// pending reports have no claim queue entry (``ResolutionEngine/requeueStalledAccounts(age:limit:)``). `now` and the interval come from the
/// service's ``ServiceClock``.
public struct ExpirySweeper: Service {
    let engine: ResolutionEngine
    let interval: Duration
    let clock: any ServiceClock
    let batchSize: Int
    let resolutions: WakeSignal
    /// Shared rate-limit buckets, whose full ones it forgets once a minute.
    let rateBuckets: RateBuckets?
    /// Holds the expiries the App Store has not answered yet (docs/STORE.md), when configured.
    let storeCheck: AppStoreExpiryCheck?
    let logger: Logger

    public init(
        engine: ResolutionEngine, interval: Duration, clock: any ServiceClock = SystemClock(), batchSize: Int = 200,
        resolutions: WakeSignal, rateBuckets: RateBuckets? = nil, storeCheck: AppStoreExpiryCheck? = nil, logger: Logger
    ) {
        self.rateBuckets = rateBuckets
        self.storeCheck = storeCheck
        self.clock = clock
        self.engine = engine
        self.interval = interval
        self.batchSize = batchSize
        self.resolutions = resolutions
        self.logger = logger
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            var lastForget = clock.uptime()
            while !Task.isCancelled {
                await sweep()
                if let rateBuckets, clock.uptime() - lastForget >= .seconds(60) {
                    lastForget = clock.uptime()
                    do {
                        // The earlier of this process's clock and the database's: a process
                        // whose clock runs ahead must not forget a shared pause before it ends.
                        try await rateBuckets.forgetFull(now: min(clock.now(), try await rateBuckets.databaseNow()))
                    } catch {
                        logger.warning("could not forget full rate-limit buckets; will retry", metadata: ["error": "\(error)"])
                    }
                }
                // The service's clock: a test clock that jumps past an expiry wakes the sweeper.
                try? await clock.sleep(for: interval)
            }
        }
    }

    /// Resolves every account due now, in batches.
    func sweep() async {
        do {
            // Reports that lost their claim queue entry (Citus's commit window, sql/0014); the
            // re-queue notifies the workers itself.
            _ = try await engine.requeueStalledAccounts()
        } catch {
            logger.warning("could not re-queue stalled reports; will retry", metadata: ["error": "\(error)"])
        }
        // What the store has not answered yet is held first (the questions are asked apart, by
        // AppStoreExpiryQuestions: this sweep never waits on the network).
        if let storeCheck { await storeCheck.holdUnanswered() }
        do {
            while !Task.isCancelled {
                let outcome = try await engine.resolveDueAccounts(limit: batchSize)
                if outcome.accountsResolved > 0 {
                    ServiceMetrics.sweptAccounts.increment(by: outcome.accountsResolved)
                    ServiceMetrics.eventsWritten.increment(by: outcome.eventsWritten)
                    await resolutions.signal()
                }
                if outcome.accountsResolved < batchSize { return }
            }
        } catch {
            logger.warning("expiry sweep failed; will retry", metadata: ["error": "\(error)"])
        }
    }
}
