extension Connection {
    /// Runs `body` inside `BEGIN` ... `COMMIT`; rolls back and rethrows if `body` throws.
    ///
    /// If the rollback itself fails (the connection broke), the original error is rethrown;
    /// the pool discards a connection left inside a transaction, so nothing leaks.
    public func withTransaction<T>(
        isolation: IsolationLevel = .readCommitted,
        _ body: (Connection) async throws -> T
    ) async throws -> T {
        try await execute(script: isolation == .readCommitted ? "BEGIN" : "BEGIN ISOLATION LEVEL \(isolation.rawValue)")
        let value: T
        do {
            value = try await body(self)
        } catch {
            _ = try? await execute(script: "ROLLBACK")
            throw error
        }
        try await execute(script: "COMMIT")
        return value
    }
}

/// Transaction isolation levels.
public enum IsolationLevel: String, Sendable {
    case readCommitted = "READ COMMITTED"
    case repeatableRead = "REPEATABLE READ"
    case serializable = "SERIALIZABLE"
}
