import Foundation
import Logging

/// A bounded pool of PostgreSQL connections.
///
/// - Connections open lazily, up to `maximumConnections`.
/// - A caller that finds none free waits (first come, first served) up to `leaseTimeout`,
///   then gets a `.poolTimeout` error rather than hanging. The timeout runs on an injected
///   clock (the system's by default), so tests can drive it by hand.
/// - A connection that comes back goes to the oldest waiter; a waiter that gives up (cancelled
///   or timed out) leaves the queue at once, so nobody waits behind it.
/// - Before a connection is handed out it is checked without a round trip (an idle
///   connection with input waiting has lost its server); broken connections, and ones
///   returned inside a transaction, are closed instead of reused. So after a server restart
///   callers get fresh connections, and at worst one in-flight statement fails.
public actor ConnectionPool {
    public struct Configuration: Sendable {
        public var connection: ConnectionConfiguration
        public var maximumConnections: Int
        public var leaseTimeout: Duration

        public init(connection: ConnectionConfiguration, maximumConnections: Int = 10, leaseTimeout: Duration = .seconds(10)) {
            self.connection = connection
            self.maximumConnections = max(1, maximumConnections)
            self.leaseTimeout = leaseTimeout
        }
    }

    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Connection, any Error>
    }

    public nonisolated let configuration: Configuration
    private let clock: any Clock<Duration>
    private let logger: Logger
    private var idle: [Connection] = []
    private var openCount = 0
    private var waiters: [Waiter] = []
    private var nextWaiterID: UInt64 = 0
    private var isClosed = false

    public init(
        configuration: Configuration,
        clock: any Clock<Duration> = ContinuousClock(),
        logger: Logger = Logger(label: "subsync.postgres.pool")
    ) {
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
    }

    /// Statistics for metrics and `/readyz`.
    public var statistics: (open: Int, idle: Int, waiting: Int) {
        (openCount, idle.count, waiters.count)
    }

    /// Leases a connection for the duration of `body`.
    public nonisolated func withConnection<T>(_ body: (Connection) async throws -> T) async throws -> T {
        let connection = try await lease()
        let value: T
        do {
            value = try await body(connection)
        } catch {
            await release(connection, after: error)
            throw error
        }
        await release(connection, after: nil)
        return value
    }

    /// Runs `body` in a transaction on a leased connection.
    public nonisolated func withTransaction<T>(
        isolation: IsolationLevel = .readCommitted,
        _ body: (Connection) async throws -> T
    ) async throws -> T {
        try await withConnection { connection in
            try await connection.withTransaction(isolation: isolation, body)
        }
    }

    /// Runs one statement on a leased connection.
    @discardableResult
    public nonisolated func query(_ query: PostgresQuery) async throws -> QueryResult {
        try await withConnection { try await $0.query(query) }
    }

    /// Runs one statement as a cached prepared statement on a leased connection.
    @discardableResult
    public nonisolated func preparedQuery(_ query: PostgresQuery) async throws -> QueryResult {
        try await withConnection { try await $0.preparedQuery(query) }
    }

    /// Opens connections ahead of need, concurrently, until `count` are open (at most
    /// `maximumConnections`), and returns once each attempt has ended. A connection goes to a
    /// caller waiting for one, or waits idle; one that cannot be opened is left for a later
    /// lease to open (and to report why it cannot).
    ///
    /// `subsync serve` calls it while it migrates: its workers' first claims otherwise wait
    /// for a connection each, opened one after another with the delivery loops' and the
    /// sweeper's, after the migration (docs/PERFORMANCE.md, *In the code*).
    public func prewarm(_ count: Int) async {
        let wanted = min(count, configuration.maximumConnections) - openCount
        guard wanted > 0, !isClosed else { return }
        openCount += wanted
        let configuration = configuration.connection
        let logger = logger
        await withTaskGroup(of: Connection?.self) { group in
            for _ in 0..<wanted {
                group.addTask {
                    do {
                        return try await Connection.connect(configuration: configuration, logger: logger)
                    } catch {
                        logger.debug("could not open a connection ahead of need", metadata: ["error": "\(error)"])
                        return nil
                    }
                }
            }
            for await connection in group {
                if let connection {
                    await release(connection, after: nil)
                } else {
                    connectFailed()
                }
            }
        }
    }

    /// Closes idle connections and fails waiters; connections in use close when returned.
    public func close() async {
        isClosed = true
        let closing = idle
        idle.removeAll()
        openCount -= closing.count
        for waiter in waiters {
            waiter.continuation.resume(throwing: PostgresError(.closed, message: "connection pool closed"))
        }
        waiters.removeAll()
        for connection in closing { await connection.close() }
    }

    private func lease() async throws -> Connection {
        while true {
            guard !isClosed else { throw PostgresError(.closed, message: "connection pool closed") }
            if let connection = idle.popLast() {
                if connection.isAlive() { return connection }
                logger.debug("discarding a broken idle connection", metadata: ["pid": "\(connection.backendPID)"])
                openCount -= 1
                await connection.close()
                continue
            }
            if openCount < configuration.maximumConnections {
                openCount += 1
                do {
                    return try await Connection.connect(configuration: configuration.connection, logger: logger)
                } catch {
                    openCount -= 1
                    wakeNextWaiterToConnect()
                    throw error
                }
            }
            return try await waitForConnection()
        }
    }

    private func waitForConnection() async throws -> Connection {
        nextWaiterID += 1
        let id = nextWaiterID
        let timeout = configuration.leaseTimeout
        let clock = clock
        let timer = Task { [weak self] in
            try await clock.sleep(for: timeout)
            await self?.expireWaiter(id)
        }
        defer { timer.cancel() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                if Task.isCancelled {
                    continuation.resume(throwing: CancellationError())
                } else {
                    waiters.append(Waiter(id: id, continuation: continuation))
                }
            }
        } onCancel: {
            Task { [weak self] in await self?.cancelWaiter(id) }
        }
    }

    /// A cancelled caller stops waiting at once instead of at the lease timeout. Removing the
    /// waiter before resuming it means a connection handed out meanwhile is never resumed twice.
    private func cancelWaiter(_ id: UInt64) {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return }
        waiters.remove(at: index).continuation.resume(throwing: CancellationError())
    }

    private func expireWaiter(_ id: UInt64) {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return }
        let waiter = waiters.remove(at: index)
        waiter.continuation.resume(
            throwing: PostgresError(.poolTimeout, message: "no database connection became free within \(configuration.leaseTimeout)")
        )
    }

    private func release(_ connection: Connection, after error: (any Error)?) async {
        let broken = (error as? PostgresError)?.isConnectionLoss ?? false
        let reusable = !broken && !isClosed && connection.isReusable()
        guard reusable else {
            openCount -= 1
            await connection.close()
            wakeNextWaiterToConnect()
            return
        }
        if !waiters.isEmpty {
            let waiter = waiters.removeFirst()
            waiter.continuation.resume(returning: connection)
        } else {
            idle.append(connection)
        }
    }

    /// A slot freed up: the first waiter gets a new connection opened for it.
    private func wakeNextWaiterToConnect() {
        guard !waiters.isEmpty, openCount < configuration.maximumConnections else { return }
        let waiter = waiters.removeFirst()
        openCount += 1
        let configuration = configuration.connection
        let logger = logger
        Task {
            do {
                let connection = try await Connection.connect(configuration: configuration, logger: logger)
                waiter.continuation.resume(returning: connection)
            } catch {
                self.connectFailed()
                waiter.continuation.resume(throwing: error)
            }
        }
    }

    private func connectFailed() {
        openCount -= 1
        // The next waiter tries too: with the server down, waiters learn it now rather than
        // at their lease timeout.
        wakeNextWaiterToConnect()
    }
}
