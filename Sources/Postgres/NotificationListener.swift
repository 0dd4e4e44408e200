import Foundation
import Logging

/// A dedicated connection that LISTENs to channels and waits for NOTIFY messages.
///
/// It is kept out of the pool on purpose: a listening connection must stay open and idle.
/// If the connection breaks, the next ``wait(timeout:)`` reconnects and LISTENs again; callers
/// should still poll as a fallback, since notifications sent while disconnected are lost.
public actor NotificationListener {
    private let configuration: ConnectionConfiguration
    private let channels: [String]
    private let logger: Logger
    private var connection: Connection?

    public init(configuration: ConnectionConfiguration, channels: [String], logger: Logger = Logger(label: "subsync.postgres.listen")) {
        self.configuration = configuration
        self.channels = channels
        self.logger = logger
    }

    /// Waits up to `timeout` for notifications; returns an empty array on timeout.
    /// Throws only when (re)connecting fails, so a caller can back off and retry.
    public func wait(timeout: Duration) async throws -> [PostgresNotification] {
        let connection = try await connected()
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        do {
            return try await connection.waitForNotifications(timeout: seconds)
        } catch {
            logger.warning("listening connection lost; will reconnect", metadata: ["error": "\(error)"])
            await connection.close()
            self.connection = nil
            throw error
        }
    }

    /// Closes the listening connection.
    public func close() async {
        await connection?.close()
        connection = nil
    }

    private func connected() async throws -> Connection {
        if let connection { return connection }
        let connection = try await Connection.connect(configuration: configuration, logger: logger)
        for channel in channels {
            let quoted = try await connection.escapeIdentifier(channel)
            try await connection.execute(script: "LISTEN \(quoted)")
        }
        self.connection = connection
        return connection
    }
}

extension Connection {
    /// Sends a notification on `channel` (`pg_notify`, parameterized). Inside a transaction it
    /// is delivered at commit, and not at all on rollback.
    public func notify(channel: String, payload: String = "") async throws {
        try await query("SELECT pg_notify(\(channel), \(payload))")
    }
}

extension ConnectionPool {
    /// Sends a notification on `channel` on a connection of the pool, committed on its own.
    public func notify(channel: String, payload: String = "") async throws {
        try await query("SELECT pg_notify(\(channel), \(payload))")
    }
}
