import Foundation
import Logging
import Postgres
import ServiceLifecycle
import SyncCore

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

/// Keeps an embedded PostgreSQL alive while the service runs, and stops it when the service
/// group shuts down.
///
/// Every `checkInterval` it asks whether the postmaster is alive. When it is gone (killed,
/// crashed, stopped by hand) it starts it again, up to `restartAttempts` times in a row with
/// backoff (1 s, 2 s, 4 s, ...); when none succeeds it throws, so the service group stops and
/// `serve` exits non-zero for a supervisor to restart, instead of answering 503 for good. Only
/// the process that owns the server (``LocalServer/Ownership``) runs this service, so the server
/// is stopped by its owner only.
public struct EmbeddedPostgresService: Service {
    /// The server gave up: it could not be started again after dying.
    public struct Failure: Error, CustomStringConvertible {
        public let attempts: Int
        public let lastError: String
        public var description: String {
            "the embedded PostgreSQL died and could not be restarted (\(attempts) attempts; last: \(lastError))"
        }
    }

    public let server: LocalServer
    let ownership: LocalServer.Ownership?
    let clock: any ServiceClock
    let checkInterval: Duration
    let restartAttempts: Int
    let logger: Logger

    public init(
        server: LocalServer, ownership: LocalServer.Ownership? = nil, clock: any ServiceClock = .system,
        checkInterval: Duration = .seconds(2), restartAttempts: Int = 5, logger: Logger
    ) {
        self.server = server
        self.ownership = ownership
        self.clock = clock
        self.checkInterval = checkInterval
        self.restartAttempts = max(1, restartAttempts)
        self.logger = logger
    }

    public func run() async throws {
        let outcome: Result<Void, any Error> = await cancelWhenGracefulShutdown {
            do {
                try await watch()
                return .success(())
            } catch is CancellationError {
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        let server = server
        do {
            try await runBlocking { try server.stop() }
            logger.info("embedded PostgreSQL stopped")
        } catch {
            logger.error("could not stop the embedded PostgreSQL", metadata: ["error": "\(error)"])
        }
        withExtendedLifetime(ownership) {}
        try outcome.get()
    }

    /// Returns only by throwing: cancellation at shutdown, or ``Failure``.
    func watch() async throws {
        let server = server
        while true {
            try await clock.sleep(for: checkInterval)
            if server.postmasterIsAlive { continue }
            logger.error("the embedded PostgreSQL is gone; starting it again", metadata: ["data": "\(server.dataDirectory.path)"])
            var attempt = 0
            while true {
                attempt += 1
                do {
                    try await runBlocking { try server.start() }
                    logger.notice("embedded PostgreSQL started again", metadata: ["attempt": "\(attempt)"])
                    break
                } catch {
                    guard attempt < restartAttempts else {
                        throw Failure(attempts: attempt, lastError: "\(error)")
                    }
                    logger.warning("could not start the embedded PostgreSQL again", metadata: ["attempt": "\(attempt)", "error": "\(error)"])
                    try await clock.sleep(for: .seconds(1 << min(attempt - 1, 5)))
                }
            }
        }
    }
}
