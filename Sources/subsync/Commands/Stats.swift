import ArgumentParser
import Foundation
import Logging
import Postgres
import SyncStore

struct Stats: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Show pipeline and webhook health: inbox depth, lag, quarantine, deliveries, endpoint success rates.",
        discussion: """
            Examples:
              subsync stats
              subsync stats --window 1h --json
            """
    )
    @OptionGroup var database: DatabaseOptions
    @Option(help: "Window of the endpoint success rates (e.g. 24h, 30m, 7d).") var window: String = "24h"
    @Flag(help: "Print machine-readable JSON instead of text.") var json = false

    func validate() throws {
        guard Operator.parseDuration(window) != nil else { throw ValidationError("--window must be a duration like 24h, 30m or 7d") }
    }

    func run() async throws {
        let seconds = Operator.parseDuration(window) ?? 86_400
        let stats = try await Operator.withPool(database, label: "subsync.stats") { pool in
            try await OperationsStats.read(pool: pool, window: seconds)
        }
        if json {
            try printJSON(stats)
            return
        }
        print("inbox: \(stats.pendingReports) pending reports, oldest \(String(format: "%.1f", stats.oldestPendingAgeSeconds)) s old; \(stats.quarantinedReports) quarantined")
        let tiers = stats.accountsByTier.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
        print("accounts: \(tiers.isEmpty ? "none" : tiers.joined(separator: ", "))")
        let deliveries = stats.deliveriesByStatus.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
        print("deliveries: \(deliveries.isEmpty ? "none" : deliveries.joined(separator: ", "))")
        print("endpoints (last \(window)):")
        if stats.endpoints.isEmpty { print("  (none)") }
        for e in stats.endpoints {
            let rate = e.successRate.map { String(format: "%.1f%%", $0 * 100) } ?? "-"
            let latency = e.averageLatencyMilliseconds.map { String(format: "%.0f ms", $0) } ?? "-"
            let p50 = e.p50LatencyMilliseconds.map { String(format: "%.0f", $0) } ?? "-"
            let p99 = e.p99LatencyMilliseconds.map { String(format: "%.0f", $0) } ?? "-"
            let failing = e.failingSince.map { "  failing since \(Operator.time($0))" } ?? ""
            print("  \(e.endpointID.uuidString.lowercased())  \(e.enabled ? "enabled " : "disabled")  \(e.url)  \(e.succeeded)/\(e.attempts) succeeded (\(rate))  avg \(latency), p50 \(p50) ms, p99 \(p99) ms\(failing)")
        }
    }
}
