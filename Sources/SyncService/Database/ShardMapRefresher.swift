import Logging
import ServiceLifecycle
import SyncCore
import SyncStore

/// Keeps the ``AccountRouter``'s shard map current: read at start, then every `interval` (and
/// every 5 s while the coordinator cannot answer), so that a shard moved or a node added is
/// routed to within that time; until then a stale map is slower, never wrong (docs/CITUS.md,
/// "How the pipeline runs on Citus"). At shutdown it closes the worker nodes' pools. On one
/// PostgreSQL it asks once whether Citus is there and then only waits for shutdown.
struct ShardMapRefresher: Service, CustomStringConvertible {
    let router: AccountRouter
    let clock: any ServiceClock
    var interval: Duration = .seconds(30)
    let logger: Logger

    var description: String { "ShardMapRefresher" }

    func run() async throws {
        await cancelWhenGracefulShutdown { try? await refreshing() }
        // Returned early on one PostgreSQL: nothing to do until shutdown.
        try? await gracefulShutdown()
        await router.close()
    }

    /// Returns on one PostgreSQL; otherwise runs until cancelled.
    private func refreshing() async throws {
        while true {
            let next: Duration
            do {
                guard try await router.refresh() != nil else { return }
                next = interval
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                logger.warning("could not read the Citus shard map; accounts go through the coordinator meanwhile",
                               metadata: ["error": "\(error)"])
                next = .seconds(5)
            }
            try await clock.sleep(for: next)
        }
    }
}
