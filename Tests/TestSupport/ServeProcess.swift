import Foundation

/// `subsync serve` as a process: the one way the tests start the binary's server, for what only
/// a process shows (signals, exit codes, logs, descriptors, several processes on one database).
/// Its standard output and error go to a log file, read with ``output()``.
public final class ServeProcess: @unchecked Sendable {
    // @unchecked: a test drives one instance from one task at a time; `process` and `logFile`
    // change only in `launch`, before anything reads them.

    /// The admin key of ``apiOnly``'s environment.
    public static let adminKey = "serve-process-admin-key"

    /// The settings of an API-only serve on the test database: no delivery loop, the test's admin
    /// key, and connections kept for as long as a test on a busy core holds them.
    public static let apiOnly: [String: String] = [
        "SUBSYNC_DELIVERY_WORKERS": "0",
        "SUBSYNC_ADMIN_KEY": adminKey,
        "SUBSYNC_HTTP_IDLE_TIMEOUT_SECONDS": "3600",
    ]

    public let port: Int
    public private(set) var process: Process?
    public private(set) var logFile: URL
    private let logDirectory: URL

    /// A serve to be launched on `port`, logging into `logDirectory`.
    public init(port: Int = freeTCPPort(), logDirectory: URL = FileManager.default.temporaryDirectory) {
        self.port = port
        self.logDirectory = logDirectory
        self.logFile = logDirectory.appendingPathComponent("subsync-serve-\(UUID().uuidString).log")
    }

    deinit {
        if let process, process.isRunning { process.terminate() }
    }

    /// `subsync serve` on the test database with `workers` resolution workers, signatures not
    /// required and a database answer timeout a busy core cannot outlast; `environment` is laid
    /// over that. Returns once `/readyz` answers 200 (or throws, with the log).
    public static func onTestDatabase(
        workers: Int = 0, port: Int = freeTCPPort(), environment: [String: String] = [:]
    ) async throws -> ServeProcess {
        let serve = ServeProcess(port: port)
        var settings = ["SUBSYNC_REQUIRE_SIGNED": "false", "SUBSYNC_DB_ANSWER_TIMEOUT_SECONDS": "600", "SUBSYNC_LOG_LEVEL": "error"]
        settings.merge(environment) { $1 }
        try serve.launch(["--workers", String(workers), "--database-url", try TestDatabase.url()], environment: settings)
        try await serve.waitUntilReady()
        return serve
    }

    /// Starts `subsync serve --port <port>` with `arguments` after that, this process's
    /// environment without `removing` and with `environment` laid over it, in `directory`.
    public func launch(_ arguments: [String] = [], environment: [String: String] = [:], removing: [String] = [], directory: URL? = nil) throws {
        let process = Process()
        process.executableURL = TestPackage.subsyncBinary
        process.arguments = ["serve", "--port", String(port)] + arguments
        if let directory { process.currentDirectoryURL = directory }
        var inherited = ProcessInfo.processInfo.environment
        for name in removing { inherited.removeValue(forKey: name) }
        inherited.merge(environment) { $1 }
        process.environment = inherited
        logFile = logDirectory.appendingPathComponent("subsync-serve-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
        let handle = try FileHandle(forWritingTo: logFile)
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        try handle.close()
        self.process = process
    }

    public enum Outcome: Sendable { case ready, exited }

    /// Waits until `/readyz` answers 200 or the process has exited; nil when neither happened in
    /// `seconds`.
    public func readyOrExited(seconds: Double = 600) async -> Outcome? {
        var outcome: Outcome?
        let url = "http://127.0.0.1:\(port)/readyz"
        _ = await waitUntil(seconds: seconds) {
            if self.process?.isRunning != true { outcome = .exited; return true }
            if await httpStatus(url) == 200 { outcome = .ready; return true }
            return false
        }
        return outcome
    }

    /// Waits until `/readyz` answers 200; throws with the log when serve exits or takes longer
    /// than `seconds` (ten minutes by default: an embedded PostgreSQL's initdb on a busy core).
    public func waitUntilReady(seconds: Double = 600) async throws {
        let outcome = await readyOrExited(seconds: seconds)
        guard outcome == .ready else {
            terminate()
            throw ServeProcessError("serve did not become ready (\(outcome.map { "\($0)" } ?? "timed out")): \((try? output()) ?? "")")
        }
    }

    public var isRunning: Bool { process?.isRunning == true }
    public var processIdentifier: Int32 { process?.processIdentifier ?? 0 }
    public var terminationStatus: Int32 { process?.terminationStatus ?? -1 }

    /// What serve wrote to its standard output and error so far.
    public func output() throws -> String { try String(contentsOf: logFile, encoding: .utf8) }

    /// The descriptors serve holds open now.
    public func openDescriptors() throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/\(processIdentifier)/fd").count
    }

    /// SIGTERM, without waiting.
    public func terminate() {
        if let process, process.isRunning { process.terminate() }
    }

    /// Whether serve has exited within `seconds`.
    public func waitForExit(seconds: Double = 300) async -> Bool {
        await waitUntil(seconds: seconds) { self.process?.isRunning != true }
    }

    /// SIGTERM, and whether serve exited within `seconds`.
    @discardableResult
    public func stop(seconds: Double = 300) async -> Bool {
        terminate()
        return await waitForExit(seconds: seconds)
    }
}

/// Why a ``ServeProcess`` could not be used, with its log.
public struct ServeProcessError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
