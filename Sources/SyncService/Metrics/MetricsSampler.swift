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
            let gauges = try await ReportInbox(pool: pool).gauges()
            ServiceMetrics.inboxDepth.record(gauges.pendingReports)
            ServiceMetrics.resolutionLag.record(gauges.resolutionLagSeconds)
            ServiceMetrics.quarantined.record(gauges.quarantinedReports)
            history?.record(
                at: clock.now(), inboxDepth: gauges.pendingReports, resolutionLagSeconds: gauges.resolutionLagSeconds,
                quarantinedReports: gauges.quarantinedReports, counters: registry.map(Self.counters(in:)))
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
