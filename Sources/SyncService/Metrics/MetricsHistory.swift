import Foundation
import NIOConcurrencyHelpers

/// The last hour of what ``MetricsSampler`` samples, in memory, for the console's chart
/// (`GET /v1/admin/metrics/history`).
///
/// Gauges (inbox depth, resolution lag, quarantined reports) are read from the database, so every
/// process sees the same values; rates are differences of this process's Prometheus counters
/// between two samples, so with several `serve` processes each shows its own share.
public final class MetricsHistory: Sendable {
    /// One sample.
    public struct Sample: Sendable, Codable, Equatable {
        public var at: Date
        public var inboxDepth: Int
        public var resolutionLagSeconds: Double
        public var quarantinedReports: Int
        /// Per second since the previous sample; nil for the first sample.
        public var reportsAcceptedPerSecond: Double?
        public var reportsResolvedPerSecond: Double?
        public var eventsWrittenPerSecond: Double?

        enum CodingKeys: String, CodingKey {
            case at
            case inboxDepth = "inbox_depth"
            case resolutionLagSeconds = "resolution_lag_seconds"
            case quarantinedReports = "quarantined_reports"
            case reportsAcceptedPerSecond = "reports_accepted_per_second"
            case reportsResolvedPerSecond = "reports_resolved_per_second"
            case eventsWrittenPerSecond = "events_written_per_second"
        }
    }

    /// The counters whose rates are kept (Prometheus names of ``ServiceMetrics``).
    public struct Counters: Sendable, Equatable {
        public var reportsAccepted: Double
        public var reportsResolved: Double
        public var eventsWritten: Double

        public init(reportsAccepted: Double, reportsResolved: Double, eventsWritten: Double) {
            self.reportsAccepted = reportsAccepted
            self.reportsResolved = reportsResolved
            self.eventsWritten = eventsWritten
        }

        /// Reads the counters from Prometheus text exposition (what `GET /metrics` answers);
        /// a counter not written yet is 0.
        public init(prometheusText text: String) {
            var values: [Substring: Double] = [:]
            for line in text.split(separator: "\n") where !line.hasPrefix("#") {
                let parts = line.split(separator: " ")
                guard parts.count >= 2, let value = Double(parts[1]) else { continue }
                values[parts[0]] = value
            }
            self.init(
                reportsAccepted: values["subsync_reports_accepted_total"] ?? 0,
                reportsResolved: values["subsync_reports_resolved_total"] ?? 0,
                eventsWritten: values["subsync_events_written_total"] ?? 0)
        }
    }

    private struct State {
        var samples: [Sample] = []
        var lastCounters: (at: Date, counters: Counters)?
    }

    /// How far back samples are kept.
    public let span: TimeInterval
    private let state = NIOLockedValueBox(State())

    public init(span: TimeInterval = 3600) {
        self.span = span
    }

    /// Adds a sample taken at `at`, and forgets those older than ``span``.
    public func record(at: Date, inboxDepth: Int, resolutionLagSeconds: Double, quarantinedReports: Int, counters: Counters?) {
        state.withLockedValue { state in
            var sample = Sample(
                at: at, inboxDepth: inboxDepth, resolutionLagSeconds: resolutionLagSeconds, quarantinedReports: quarantinedReports)
            if let counters, let last = state.lastCounters, at > last.at {
                let seconds = at.timeIntervalSince(last.at)
                // A counter never goes down within a process; a lower value means a reset.
                func rate(_ now: Double, _ before: Double) -> Double { max(0, now - before) / seconds }
                sample.reportsAcceptedPerSecond = rate(counters.reportsAccepted, last.counters.reportsAccepted)
                sample.reportsResolvedPerSecond = rate(counters.reportsResolved, last.counters.reportsResolved)
                sample.eventsWrittenPerSecond = rate(counters.eventsWritten, last.counters.eventsWritten)
            }
            if let counters { state.lastCounters = (at, counters) }
            state.samples.append(sample)
            let cutoff = at.addingTimeInterval(-span)
            if let keep = state.samples.firstIndex(where: { $0.at >= cutoff }), keep > 0 {
                state.samples.removeFirst(keep)
            }
        }
    }

    /// The samples kept, oldest first.
    public func samples() -> [Sample] {
        state.withLockedValue { $0.samples }
    }
}
