import Foundation
import Postgres

/// The test database, from `DATABASE_URL` (which `scripts/test` sets to a throwaway server).
///
/// Tests that change the schema or need a clean slate call ``withFreshDatabase(_:)``, which
/// creates a database of their own and drops it afterwards, so tests can run in parallel.
public enum TestDatabase {
    /// The configured server, or a clear failure when the tests were started without one.
    public static func configuration() throws -> ConnectionConfiguration {
        guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty else {
            throw TestSetupError("DATABASE_URL is not set: run the tests with scripts/test, which starts a throwaway PostgreSQL")
        }
        return try ConnectionConfiguration(url: url)
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
