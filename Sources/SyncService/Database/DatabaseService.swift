import Logging
import Postgres
import ServiceLifecycle

/// Owns the connection pool's lifetime inside the service group: it waits for the graceful
/// shutdown signal and closes the pool after the services that use it have stopped
/// (it is listed first, so the group shuts it down last).
public struct DatabaseService: Service {
    public let pool: ConnectionPool
    let logger: Logger

    public init(pool: ConnectionPool, logger: Logger) {
        self.pool = pool
        self.logger = logger
    }

    public func run() async throws {
        try? await gracefulShutdown()
        await pool.close()
        logger.info("database pool closed")
    }
}

/// Stops an embedded PostgreSQL when the service group shuts down.
public struct EmbeddedPostgresService: Service {
    public let server: LocalServer
    let logger: Logger

    public init(server: LocalServer, logger: Logger) {
        self.server = server
        self.logger = logger
    }

    public func run() async throws {
        try? await gracefulShutdown()
        do {
            try server.stop()
            logger.info("embedded PostgreSQL stopped")
        } catch {
            logger.error("could not stop the embedded PostgreSQL", metadata: ["error": "\(error)"])
        }
    }
}
