import Logging
import Postgres
import ServiceLifecycle

/// Samples queue metrics from the database every few seconds: inbox depth, resolution lag (age
/// of the oldest pending report) and quarantined reports.
public struct MetricsSampler: Service {
    let pool: ConnectionPool
    let interval: Duration
    let logger: Logger

    public init(pool: ConnectionPool, interval: Duration = .seconds(5), logger: Logger) {
        self.pool = pool
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await sample()
                try? await Task.sleep(for: interval)
            }
        }
    }

    func sample() async {
        do {
            let rows = try await pool.preparedQuery(
                """
                SELECT
                    (SELECT count(*) FROM reports WHERE status = 'pending'),
                    (SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(received_at)), 0)::float8 FROM reports WHERE status = 'pending'),
                    (SELECT count(*) FROM reports WHERE status = 'quarantined')
                """
            )
            ServiceMetrics.inboxDepth.record(try rows[0].decode(Int.self, at: 0))
            ServiceMetrics.resolutionLag.record(try rows[0].decode(Double.self, at: 1))
            ServiceMetrics.quarantined.record(try rows[0].decode(Int.self, at: 2))
        } catch {
            logger.debug("metrics sample failed", metadata: ["error": "\(error)"])
        }
    }
}
