import Dispatch
import Foundation
import Logging

/// One PostgreSQL connection.
///
/// libpq calls block, so each connection owns a serial dispatch queue and runs every libpq
/// call there, never on Swift's cooperative thread pool. The serial queue is also what makes
/// the connection safe to share: one call at a time reaches the `PGconn`.
///
/// `@unchecked Sendable`: the only mutable state, the handle and the prepared-statement
/// cache, is touched exclusively from `queue`.
public final class Connection: @unchecked Sendable {
    private let queue: DispatchQueue
    private let handle: ConnectionHandle
    private var preparedStatements: [String: String] = [:]
    private static let preparedStatementLimit = 512
    let logger: Logger

    /// The server process serving this connection (for `pg_terminate_backend` and logs).
    public let backendPID: Int32
    /// The server version as an integer, such as 150018.
    public let serverVersion: Int32

    private init(handle: ConnectionHandle, queue: DispatchQueue, logger: Logger) {
        self.handle = handle
        self.queue = queue
        self.logger = logger
        self.backendPID = handle.backendPID
        self.serverVersion = handle.serverVersion
    }

    /// Opens a connection. The blocking connect runs off the cooperative pool.
    public static func connect(
        configuration: ConnectionConfiguration,
        logger: Logger = Logger(label: "subsync.postgres")
    ) async throws -> Connection {
        let queue = DispatchQueue(label: "subsync.postgres.connection")
        let handle = try await run(on: queue) { try ConnectionHandle(configuration: configuration, logger: logger) }
        return Connection(handle: handle, queue: queue, logger: logger)
    }

    /// Runs a statement with its bound parameters (`PQexecParams`).
    @discardableResult
    public func query(_ query: PostgresQuery) async throws -> QueryResult {
        try await onQueue { handle, _ in
            try handle.execute(query.sql, binds: query.binds, preparedName: nil)
        }
    }

    /// Runs a statement as a named prepared statement, preparing it on first use on this
    /// connection. Use it for statements whose SQL text is fixed and which run often: the
    /// server parses and plans them once.
    @discardableResult
    public func preparedQuery(_ query: PostgresQuery) async throws -> QueryResult {
        try await onQueue { handle, connection in
            if let name = connection.preparedStatements[query.sql] {
                return try handle.execute(query.sql, binds: query.binds, preparedName: name)
            }
            guard connection.preparedStatements.count < Self.preparedStatementLimit else {
                return try handle.execute(query.sql, binds: query.binds, preparedName: nil)
            }
            let name = "subsync_\(connection.preparedStatements.count + 1)"
            try handle.prepare(query.sql, name: name, parameterCount: query.binds.count)
            connection.preparedStatements[query.sql] = name
            return try handle.execute(query.sql, binds: query.binds, preparedName: name)
        }
    }

    /// Runs one or more parameterless commands as sent (`PQexec`), e.g. a migration file.
    /// Never build `sql` from input: it has no parameters.
    @discardableResult
    public func execute(script sql: String) async throws -> QueryResult {
        try await onQueue { handle, _ in try handle.executeSimple(sql, waitForever: true) }
    }

    /// Whether the connection is open and has no unexpected input (checked without blocking).
    public func isAlive() async -> Bool {
        (try? await onQueue { handle, _ in handle.isAliveWhenIdle() }) ?? false
    }

    /// Whether the connection is open, idle and outside a transaction block.
    func isReusable() async -> Bool {
        (try? await onQueue { handle, _ in handle.isOK && handle.isIdleOutsideTransaction }) ?? false
    }

    /// Quotes an identifier for use in SQL text, such as a LISTEN channel.
    public func escapeIdentifier(_ identifier: String) async throws -> String {
        try await onQueue { handle, _ in try handle.escapeIdentifier(identifier) }
    }

    /// Waits up to `timeout` seconds for notifications on channels this connection LISTENs to.
    func waitForNotifications(timeout: Double) async throws -> [PostgresNotification] {
        try await onQueue { handle, _ in try handle.waitForNotifications(timeout: timeout) }
    }

    /// Closes the connection now; later calls throw `.closed`.
    public func close() async {
        _ = try? await onQueue { handle, _ in handle.close() }
    }

    private func onQueue<T: Sendable>(_ body: @escaping @Sendable (ConnectionHandle, Connection) throws -> T) async throws -> T {
        let handle = self.handle
        return try await Self.run(on: queue) { try body(handle, self) }
    }

    private static func run<T: Sendable>(on queue: DispatchQueue, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            queue.async {
                continuation.resume(with: Result { try body() })
            }
        }
    }
}
