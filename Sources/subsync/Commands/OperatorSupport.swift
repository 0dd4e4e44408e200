import ArgumentParser
import Dispatch
import Foundation
import Logging
import Postgres
import Atomics
import SyncCore
import SyncService
import SyncStore

/// What the operator commands share: a pool, the catalogue, error mapping, parsing.
enum Operator {
    /// Who an audited command records: `--actor`, else `$USER`, else `unknown`.
    static func actor(_ given: String?) -> String {
        if let given, !given.isEmpty { return given }
        return ProcessInfo.processInfo.environment["USER"].flatMap { $0.isEmpty ? nil : $0 } ?? "unknown"
    }

    /// The catalogue the service resolves with ($SUBSYNC_CATALOGUE or the built-in one), so
    /// recomputations agree with the workers.
    static func catalogue() throws -> Catalogue {
        try loadCatalogue(path: ServiceConfiguration.cataloguePath(from: ProcessInfo.processInfo.environment))
    }

    /// Runs `body` with a pool on the configured database, closes the pool, and maps failures
    /// to the documented exit codes (after saying what happened on stderr).
    static func withPool<T>(
        _ database: DatabaseOptions, size: Int = 2, label: String, _ body: (ConnectionPool) async throws -> T
    ) async throws -> T {
        let pool = try database.makePool(size: size, logger: Logger(label: label))
        do {
            let value = try await body(pool)
            await pool.close()
            return value
        } catch {
            await pool.close()
            throw exitCode(for: error)
        }
    }

    /// The exit code of `error`, after printing it (exit codes pass through unchanged).
    static func exitCode(for error: any Error) -> any Error {
        switch error {
        case let code as ExitCode:
            return code
        case let failure as AdminOverride.Failure:
            printError(failure.description)
            if case .ambiguous = failure { return ExitCodes.usage }
            return ExitCodes.notFound
        case let failure as QuarantinedReports.Failure:
            printError(failure.description)
            if case .ambiguous = failure { return ExitCodes.usage }
            return ExitCodes.notFound
        default:
            return failureExitCode(for: error)
        }
    }

    /// A duration like `90d`, `12h`, `30m`, `45s` or `2w`, in seconds; nil when malformed.
    static func parseDuration(_ text: String) -> TimeInterval? {
        guard let unit = text.last, let amount = Double(text.dropLast()), amount.isFinite, amount > 0 else { return nil }
        switch unit {
        case "s": return amount
        case "m": return amount * 60
        case "h": return amount * 3_600
        case "d": return amount * 86_400
        case "w": return amount * 7 * 86_400
        default: return nil
        }
    }

    /// `--since`: an RFC 3339 time, or a duration back from now (`24h`, `7d`).
    static func parseSince(_ text: String, now: Date = Date()) throws -> Date {
        if let seconds = parseDuration(text) { return now.addingTimeInterval(-seconds) }
        if let date = RFC3339.parse(text) { return date }
        throw ValidationError("--since must be an RFC 3339 time (2026-11-01T00:00:00Z) or a duration back from now (24h, 7d)")
    }

    /// Prints a value as one compact JSON line (for streamed JSON arrays).
    static func compactJSON(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(RFC3339.format(date))
        }
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// A time for people and scripts alike.
    static func time(_ date: Date?) -> String {
        date.map(RFC3339.format) ?? "-"
    }
}

/// Set by SIGINT; long commands check it between batches, save where they are, and stop.
final class InterruptFlag {
    /// What the signal handler touches: only an atomic.
    private final class State: Sendable {
        let flag = ManagedAtomic<Bool>(false)
    }

    private let state = State()
    private var source: (any DispatchSourceSignal)?

    /// Installs the handler: the first SIGINT sets the flag, a second one exits at once.
    func install() {
        signal(SIGINT, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        let state = self.state
        source.setEventHandler {
            if state.flag.exchange(true, ordering: .relaxed) {
                FileHandle.standardError.write(Data("\nsubsync: interrupted twice, stopping now\n".utf8))
                exit(130)
            }
            FileHandle.standardError.write(Data("\nsubsync: interrupting after the current batch (Ctrl-C again to stop now)\n".utf8))
        }
        source.resume()
        self.source = source
    }

    var isSet: Bool { state.flag.load(ordering: .relaxed) }
}

/// A progress display on stderr: a bar redrawn in place on a terminal, a plain line every few
/// seconds otherwise (logs, CI).
final class ProgressDisplay {
    private let total: Int?
    private let label: String
    private let isTerminal = isatty(STDERR_FILENO) == 1
    private let start = ContinuousClock.now
    private var lastDraw = ContinuousClock.now - .seconds(60)
    private var lastDrawn = -1
    private let enabled: Bool

    init(label: String, total: Int?, enabled: Bool = true) {
        self.label = label
        self.total = total
        self.enabled = enabled
    }

    /// `done` items so far (of which `skipped` were done by an earlier, resumed run).
    func update(done: Int, skipped: Int = 0, final: Bool = false) {
        guard enabled else { return }
        let now = ContinuousClock.now
        let interval: Duration = isTerminal ? .milliseconds(100) : .seconds(5)
        guard final ? done != lastDrawn || isTerminal : now - lastDraw >= interval else { return }
        lastDraw = now
        lastDrawn = done
        let elapsed = max(Self.seconds(now - start), 0.001)
        let rate = Double(done - skipped) / elapsed
        var text: String
        if let total, total > 0 {
            let fraction = min(Double(done) / Double(total), 1)
            let remaining = rate > 0 ? Double(max(total - done, 0)) / rate : 0
            text = "\(done)/\(total) (\(Int(fraction * 100))%)  \(Int(rate)) \(label)/s  ETA \(Self.clock(remaining))"
            if isTerminal {
                let width = 30
                let filled = Int(fraction * Double(width))
                text = "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled) + "] " + text
            }
        } else {
            text = "\(done) \(label)  \(Int(rate)) \(label)/s"
        }
        if isTerminal {
            FileHandle.standardError.write(Data("\r\u{1B}[K\(text)\(final ? "\n" : "")".utf8))
        } else {
            FileHandle.standardError.write(Data("progress: \(text)\n".utf8))
        }
    }

    /// Elapsed seconds since the display started.
    var elapsedSeconds: Double { Self.seconds(ContinuousClock.now - start) }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    private static func clock(_ seconds: Double) -> String {
        let total = Int(seconds.rounded())
        return total >= 3600 ? "\(total / 3600)h\(String(format: "%02d", total % 3600 / 60))m" : "\(total / 60):\(String(format: "%02d", total % 60))"
    }
}
