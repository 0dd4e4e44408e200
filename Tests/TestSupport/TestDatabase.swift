import Foundation
import Postgres

/// The test database: `DATABASE_URL` when it is set (`scripts/test` sets it to a throwaway
/// server), else a throwaway server this test process starts on first use, so a plain
/// `swift test` or `swift test --filter X` works by itself.
///
/// Tests that change the schema or need a clean slate call ``withFreshDatabase(_:)``, which
/// creates a database of their own and drops it afterwards, so tests can run in parallel.
public enum TestDatabase {
    /// The test server's URL: `DATABASE_URL`, or the throwaway server's (started on first use).
    public static func url() throws -> String {
        if let url = ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty { return url }
        return try ThrowawayServer.shared.get().url
    }

    /// The test server's connection configuration.
    public static func configuration() throws -> ConnectionConfiguration {
        try ConnectionConfiguration(url: url())
    }

    /// This process's environment with `DATABASE_URL` naming the test server, for the programs a
    /// test starts (`subsync serve`, the command line).
    public static func environment() throws -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["DATABASE_URL"] = try url()
        return environment
    }

    /// Creates an empty database, runs `body` with its configuration, then drops it.
    /// `creating` is added to its `CREATE DATABASE` (an encoding, say).
    public static func withFreshDatabase<T>(
        creating: String = "",
        _ body: (ConnectionConfiguration) async throws -> T
    ) async throws -> T {
        let admin = try configuration()
        let name = "subsync_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let connection = try await Connection.connect(configuration: admin)
        try await connection.execute(script: "CREATE DATABASE \(name) \(creating)")
        var fresh = admin
        fresh["dbname"] = name
        do {
            let value = try await body(fresh)
            try await drop(name, using: connection)
            return value
        } catch {
            try? await drop(name, using: connection)
            throw error
        }
    }

    private static func drop(_ name: String, using connection: Connection) async throws {
        try await connection.execute(script: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        await connection.close()
    }
}

public struct TestSetupError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
