import Dispatch
import Foundation
import Logging
import NIOConcurrencyHelpers

/// One PostgreSQL connection.
///
/// libpq calls block, so each connection owns a serial dispatch queue and runs every libpq
/// call there, never on Swift's cooperative thread pool. The serial queue is also what makes
/// the connection safe to share: one call at a time reaches the `PGconn`.
///
/// Each trip to the queue and back is two thread switches, so the connection makes as few as
/// it can: a transaction's `BEGIN` travels with its first statement, the pool's checks run on
/// the caller's thread, and nothing else is a trip of its own.
///
/// `@unchecked Sendable`: the mutable state, the handle and the prepared-statement cache, is
/// touched only from `queue` (``isAlive()`` reaches it with `queue.sync`); `session`, what
/// callers read and set between statements, is behind its own mutex.
public final class Connection: @unchecked Sendable {
    private let queue: DispatchQueue
    private let handle: ConnectionHandle
    private var preparedStatements: [PreparedKey: String] = [:]
    private let session = NIOLockedValueBox(Session())

    /// What is read and set outside the queue.
    private struct Session {
        /// The `BEGIN` that ``beginWithNextStatement(_:)`` deferred, sent by the next statement.
        /// It stays pending when sending it fails, so no later statement of the same body runs
        /// outside the transaction.
        var pendingBegin: String?
        /// Whether sending the deferred `BEGIN` failed since ``beginWithNextStatement(_:)``.
        var beginFailed = false
        /// Whether the last call on the queue left the connection open, idle and outside a
        /// transaction block (recorded at the end of each call, for ``isReusable()``).
        var idleOutsideTransaction = true
    }
    private static let preparedStatementLimit = 512

    /// A prepared statement is its text and the parameter types it was prepared with: binds of
    /// other declared types (an array that was NULL the first time) prepare it again.
    private struct PreparedKey: Hashable {
        var sql: String
        var types: [UInt32]
    }
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
        try await statementOnQueue { handle, _ in
            try handle.execute(query.sql, binds: query.binds, preparedName: nil)
        }
    }

    /// Runs a statement as a named prepared statement, preparing it on first use on this
    /// connection. Use it for statements whose SQL text is fixed and which run often: the
    /// server parses and plans them once.
    @discardableResult
    public func preparedQuery(_ query: PostgresQuery) async throws -> QueryResult {
        try await statementOnQueue { handle, connection in
            let key = PreparedKey(sql: query.sql, types: query.binds.map(\.declaredType))
            if let name = connection.preparedStatements[key] {
                return try handle.execute(query.sql, binds: query.binds, preparedName: name)
            }
            guard connection.preparedStatements.count < Self.preparedStatementLimit else {
                return try handle.execute(query.sql, binds: query.binds, preparedName: nil)
            }
            let name = "subsync_\(connection.preparedStatements.count + 1)"
            try handle.prepare(query.sql, name: name, binds: query.binds)
            connection.preparedStatements[key] = name
            return try handle.execute(query.sql, binds: query.binds, preparedName: name)
        }
    }

    /// Runs one or more parameterless commands as sent (`PQexec`), e.g. a migration file.
    /// Never build `sql` from input: it has no parameters.
    @discardableResult
    public func execute(script sql: String) async throws -> QueryResult {
        try await statementOnQueue { handle, _ in try handle.executeSimple(sql, waitForever: true) }
    }

    /// Defers `sql` (a `BEGIN`) to the next statement, which sends it first in the same trip to
    /// the queue: a transaction costs one trip less.
    func beginWithNextStatement(_ sql: String) {
        session.withLockedValue { session in
            session.pendingBegin = sql
            session.beginFailed = false
        }
    }

    /// What became of a deferred `BEGIN`, for the end of ``withTransaction(isolation:_:)``.
    struct DeferredBegin {
        /// No statement sent it successfully: the transaction never started.
        var neverStarted: Bool
        /// Sending it failed at least once (a statement of the body failed because of it).
        var failed: Bool
    }

    /// Ends a deferred `BEGIN`: drops it if still pending and says what became of it.
    func endDeferredBegin() -> DeferredBegin {
        session.withLockedValue { session in
            defer {
                session.pendingBegin = nil
                session.beginFailed = false
            }
            return DeferredBegin(neverStarted: session.pendingBegin != nil, failed: session.beginFailed)
        }
    }

    /// Whether an idle connection is open and has no unexpected input, checked without blocking
    /// (a poll that does not wait, and libpq's read of a socket it keeps non-blocking).
    ///
    /// For the pool, on a connection nobody is using: its queue is idle, so `queue.sync` runs
    /// the check on the caller's thread instead of switching threads twice.
    func isAlive() -> Bool {
        let handle = self.handle
        return queue.sync { handle.isAliveWhenIdle() }
    }

    /// Whether the connection is open, idle and outside a transaction block, as the last call
    /// on it left it, with no deferred `BEGIN` left over; read without a trip to the queue (the
    /// caller has finished with it).
    func isReusable() -> Bool {
        session.withLockedValue { $0.idleOutsideTransaction && $0.pendingBegin == nil }
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
        return try await Self.run(on: queue) {
            defer { self.recordSessionState() }
            return try body(handle, self)
        }
    }

    /// ``onQueue(_:)`` for a statement: a deferred `BEGIN` goes first, in the same trip.
    private func statementOnQueue<T: Sendable>(_ body: @escaping @Sendable (ConnectionHandle, Connection) throws -> T) async throws -> T {
        try await onQueue { handle, connection in
            if let begin = connection.session.withLockedValue({ $0.pendingBegin }) {
                do {
                    _ = try handle.executeSimple(begin)
                } catch {
                    connection.session.withLockedValue { $0.beginFailed = true }
                    throw error
                }
                connection.session.withLockedValue { $0.pendingBegin = nil }
            }
            return try body(handle, connection)
        }
    }

    /// On the queue, after each call: what ``isReusable()`` reads.
    private func recordSessionState() {
        let idle = handle.isOK && handle.isIdleOutsideTransaction
        session.withLockedValue { $0.idleOutsideTransaction = idle }
    }

    private static func run<T: Sendable>(on queue: DispatchQueue, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            queue.async {
                continuation.resume(with: Result { try body() })
            }
        }
    }
}
