import Foundation
import Logging

/// Everything `subsync serve` can be told, from flags or environment variables.
///
/// Environment variable names are listed in the README's configuration table; flags of the
/// same meaning take precedence over them.
public struct ServiceConfiguration: Sendable {
    /// `DATABASE_URL`: a `postgresql://` URL. When nil, an embedded PostgreSQL is started.
    public var databaseURL: String?
    /// `SUBSYNC_HOST`: the address the HTTP server binds.
    public var host: String
    /// `SUBSYNC_PORT`: the HTTP port (0 picks a free one, for tests).
    public var port: Int
    /// `SUBSYNC_DATA_DIR`: where the embedded PostgreSQL keeps its data.
    public var dataDirectory: String
    /// `SUBSYNC_EMBEDDED_PG_PORT`: the embedded PostgreSQL's port on 127.0.0.1.
    public var embeddedPostgresPort: Int
    /// `SUBSYNC_DB_POOL_SIZE`: connections per process.
    public var databasePoolSize: Int
    /// `SUBSYNC_LOG_LEVEL`: trace, debug, info, notice, warning, error, critical.
    public var logLevel: Logger.Level

    public init(
        databaseURL: String? = nil,
        host: String = "127.0.0.1",
        port: Int = 8080,
        dataDirectory: String = ".subsync",
        embeddedPostgresPort: Int = 54_329,
        databasePoolSize: Int = 10,
        logLevel: Logger.Level = .info
    ) {
        self.databaseURL = databaseURL
        self.host = host
        self.port = port
        self.dataDirectory = dataDirectory
        self.embeddedPostgresPort = embeddedPostgresPort
        self.databasePoolSize = databasePoolSize
        self.logLevel = logLevel
    }

    /// Reads the environment; unset variables keep their defaults.
    ///
    /// - Throws: ``ConfigurationError`` naming the variable whose value is unusable.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws -> ServiceConfiguration {
        var configuration = ServiceConfiguration()
        if let url = environment["DATABASE_URL"], !url.isEmpty { configuration.databaseURL = url }
        if let host = environment["SUBSYNC_HOST"], !host.isEmpty { configuration.host = host }
        if let port = environment["SUBSYNC_PORT"] {
            configuration.port = try parsePort(port, name: "SUBSYNC_PORT")
        }
        if let directory = environment["SUBSYNC_DATA_DIR"], !directory.isEmpty { configuration.dataDirectory = directory }
        if let port = environment["SUBSYNC_EMBEDDED_PG_PORT"] {
            configuration.embeddedPostgresPort = try parsePort(port, name: "SUBSYNC_EMBEDDED_PG_PORT")
        }
        if let size = environment["SUBSYNC_DB_POOL_SIZE"] {
            guard let value = Int(size), (1...500).contains(value) else {
                throw ConfigurationError(variable: "SUBSYNC_DB_POOL_SIZE", message: "must be a whole number from 1 to 500, got \"\(size)\"")
            }
            configuration.databasePoolSize = value
        }
        if let level = environment["SUBSYNC_LOG_LEVEL"] {
            guard let value = Logger.Level(rawValue: level.lowercased()) else {
                throw ConfigurationError(variable: "SUBSYNC_LOG_LEVEL", message: "must be one of trace, debug, info, notice, warning, error, critical; got \"\(level)\"")
            }
            configuration.logLevel = value
        }
        return configuration
    }

    static func parsePort(_ text: String, name: String) throws -> Int {
        guard let value = Int(text), (0...65_535).contains(value) else {
            throw ConfigurationError(variable: name, message: "must be a port number from 0 to 65535, got \"\(text)\"")
        }
        return value
    }
}

/// A configuration value that cannot be used, with the variable or flag it came from.
public struct ConfigurationError: Error, CustomStringConvertible {
    public var variable: String
    public var message: String

    public init(variable: String, message: String) {
        self.variable = variable
        self.message = message
    }

    public var description: String { "\(variable) \(message)" }
}
