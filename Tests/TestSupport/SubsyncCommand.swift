import Foundation
import Postgres

/// A `subsync` command run to its end as a process: the one way the tests run the command line
/// (``ServeProcess`` starts `serve`, which does not end by itself).
public enum SubsyncCommand {
    /// What a command printed, and its exit status.
    public struct Output: Sendable {
        public var status: Int32
        public var stdout: String
        public var stderr: String

        /// Standard output, then standard error.
        public var output: String { stdout + stderr }
        /// Standard output parsed as JSON.
        public var json: Any? { try? JSONSerialization.jsonObject(with: Data(stdout.utf8)) }
        public var object: [String: Any] { (json as? [String: Any]) ?? [:] }
        public var array: [[String: Any]] { (json as? [[String: Any]]) ?? [] }
    }

    /// A command started and not yet waited for.
    public struct Running: @unchecked Sendable {
        // @unchecked: Process and Pipe are used from the one task that started them.
        let process: Process
        let stdout: Pipe
        let stderr: Pipe

        /// SIGINT, as Ctrl-C sends.
        public func interrupt() { process.interrupt() }

        /// Reads everything the command prints, off the cooperative pool, and waits for its end.
        public func finish() async throws -> Output {
            let (out, err) = try await runBlocking { () -> (Data, Data) in
                let out = stdout.fileHandleForReading.readDataToEndOfFile()
                let err = stderr.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                return (out, err)
            }
            return Output(
                status: process.terminationStatus, stdout: String(decoding: out, as: UTF8.self), stderr: String(decoding: err, as: UTF8.self))
        }
    }

    /// Starts `subsync <arguments>` with this process's environment and `environment` laid over
    /// it (an empty value sets the variable empty, which the commands read as unset).
    public static func start(_ arguments: [String], environment: [String: String] = [:]) throws -> Running {
        let process = Process()
        process.executableURL = TestPackage.subsyncBinary
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let stdout = Pipe(), stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return Running(process: process, stdout: stdout, stderr: stderr)
    }

    /// Runs `subsync <arguments>` to its end.
    public static func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> Output {
        try await start(arguments, environment: environment).finish()
    }
}

extension SubsyncCommand {
    /// The environment of an operator command on `env`'s database (none: `DATABASE_URL` empty),
    /// as the operator `tester`, logging warnings and worse; `extra` is laid over it.
    public static func environment(on env: TestEnvironment?, extra: [String: String] = [:]) -> [String: String] {
        var environment = ["DATABASE_URL": env.map(\.commandURL) ?? "", "SUBSYNC_LOG_LEVEL": "warning", "USER": "tester"]
        environment.merge(extra) { $1 }
        return environment
    }

    /// Runs `subsync <arguments>` against `env`'s database (``environment(on:extra:)``).
    public static func run(_ arguments: [String], env: TestEnvironment?, extra: [String: String] = [:]) async throws -> Output {
        try await run(arguments, environment: environment(on: env, extra: extra))
    }

    /// Starts `subsync <arguments>` against `env`'s database (``environment(on:extra:)``).
    public static func start(_ arguments: [String], env: TestEnvironment?, extra: [String: String] = [:]) throws -> Running {
        try start(arguments, environment: environment(on: env, extra: extra))
    }
}

extension TestEnvironment {
    /// `postgresql://user@host:port/dbname` of this database, with a connect timeout a busy core
    /// cannot outlast (subsync's own default is 5 s).
    public var commandURL: String {
        let c = connection
        return "postgresql://\(c["user"] ?? "postgres")@\(c["host"] ?? "127.0.0.1"):\(c["port"] ?? "5432")/\(c["dbname"] ?? "postgres")?connect_timeout=120"
    }
}
