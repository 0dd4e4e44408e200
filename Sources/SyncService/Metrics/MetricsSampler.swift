import Logging
import Postgres
import Prometheus
import ServiceLifecycle
import SyncCore
import SyncStore

/// Samples queue metrics from the database every few seconds: inbox depth, resolution lag (age
/// of the oldest pending report) and quarantined reports; with a ``MetricsHistory``, keeps them
/// for the console's chart together with the rates of the service's own counters, read from
/// `registry` (the one `GET /metrics` exports).
public struct MetricsSampler: Service {
    let pool: ConnectionPool
    let interval: Duration
    let logger: Logger
    let history: MetricsHistory?
    let registry: PrometheusCollectorRegistry?
    let clock: any ServiceClock

    public init(
        pool: ConnectionPool, interval: Duration = .seconds(5), history: MetricsHistory? = nil,
        registry: PrometheusCollectorRegistry? = nil, clock: any ServiceClock = SystemClock(), logger: Logger
    ) {
        self.pool = pool
        self.interval = interval
        self.history = history
        self.registry = registry
        self.clock = clock
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
                    COALESCE(EXTRACT(EPOCH FROM now() - \(unescaped: ReportInbox.oldestPendingReceivedAtSQL)), 0)::float8,
                    (SELECT count(*) FROM reports WHERE status = 'quarantined')
                """
            )
            let depth = try rows[0].decode(Int.self, at: 0)
            let lag = try rows[0].decode(Double.self, at: 1)
            let quarantined = try rows[0].decode(Int.self, at: 2)
            ServiceMetrics.inboxDepth.record(depth)
            ServiceMetrics.resolutionLag.record(lag)
            ServiceMetrics.quarantined.record(quarantined)
            history?.record(
                at: clock.now(), inboxDepth: depth, resolutionLagSeconds: lag, quarantinedReports: quarantined,
                counters: registry.map(Self.counters(in:)))
        } catch {
            logger.debug("metrics sample failed", metadata: ["error": "\(error)"])
        }
    }

    /// The counters of `registry`, from its text exposition.
    static func counters(in registry: PrometheusCollectorRegistry) -> MetricsHistory.Counters {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return MetricsHistory.Counters(prometheusText: String(decoding: buffer, as: UTF8.self))
    }
}
