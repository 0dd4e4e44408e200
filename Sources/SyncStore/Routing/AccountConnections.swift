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
    func withTransaction<T>(
        for accountID: String, isolation: IsolationLevel = .readCommitted, _ body: (Connection) async throws -> T
    ) async throws -> T {
        guard let router, router.routesTransactions else { return try await pool.withTransaction(isolation: isolation, body) }
        return try await router.withConnection(for: accountID) { try await $0.withTransaction(isolation: isolation, body) }
    }
}
