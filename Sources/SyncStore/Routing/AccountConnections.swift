import Postgres

/// Connections for one account's own statements: through the ``AccountRouter`` when there is
/// one (on Citus, the account's node), else the pool's. What the stores that route share.
struct AccountConnections: Sendable {
    let pool: ConnectionPool
    let router: AccountRouter?

    func withConnection<T>(for accountID: String, _ body: (Connection) async throws -> T) async throws -> T {
        guard let router else { return try await pool.withConnection(body) }
        return try await router.withConnection(for: accountID, body)
    }

    /// A transaction on the account's node once the router routes transactions
    /// (``AccountRouter/routesTransactions``), else on the pool.
    ///
    /// A transaction on a node that wrote deliveries wakes the delivery loops from the
    /// coordinator once it has committed: its own `NOTIFY` fires on the node, and every `serve`
    /// listens on the coordinator (docs/CITUS.md, "How the pipeline runs on Citus"). A wake-up
    /// lost there (the coordinator unreachable) leaves them to the loops' next poll.
    func withTransaction<T>(
        for accountID: String, isolation: IsolationLevel = .readCommitted, _ body: (Connection) async throws -> T
    ) async throws -> T {
        guard let router, router.routesTransactions else { return try await pool.withTransaction(isolation: isolation, body) }
        let written = Outbox.DeliveriesWritten(notesDue: router.deliveriesOnNodes)
        let result = try await Outbox.$deliveriesWritten.withValue(written) {
            try await router.withConnection(for: accountID) { try await $0.withTransaction(isolation: isolation, body) }
        }
        if written.isSet { try? await Outbox.wakeDeliveryLoops(pool: pool) }
        return result
    }
}
