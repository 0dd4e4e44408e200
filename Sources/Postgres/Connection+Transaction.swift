extension Connection {
    /// Runs `body` inside `BEGIN` ... `COMMIT`; rolls back and rethrows if `body` throws.
    ///
    /// If the rollback itself fails (the connection broke), the original error is rethrown;
    /// the pool discards a connection left inside a transaction, so nothing leaks.
    ///
    /// If a statement failed inside `body` and `body` caught the error and returned, the server
    /// has already aborted the transaction and answers `COMMIT` with a rollback; that throws
    /// (SQLSTATE 25P02) instead of returning as if the work were saved.
    ///
    /// `BEGIN` is sent with the body's first statement, in the same trip to the connection's
    /// queue; a body that runs no statement costs no round trip at all. If sending `BEGIN`
    /// fails, that statement fails, the next statement tries `BEGIN` again (no statement of the
    /// body runs outside the transaction), and the transaction throws even if the body caught
    /// the error.
    public func withTransaction<T>(
        isolation: IsolationLevel = .readCommitted,
        _ body: (Connection) async throws -> T
    ) async throws -> T {
        beginWithNextStatement(isolation == .readCommitted ? "BEGIN" : "BEGIN ISOLATION LEVEL \(isolation.rawValue)")
        let value: T
        do {
            value = try await body(self)
        } catch {
            if !endDeferredBegin().neverStarted { _ = try? await execute(script: "ROLLBACK") }
            throw error
        }
        let begin = endDeferredBegin()
        if begin.failed {
            // The body caught the failure of a statement that carried BEGIN and went on; what it
            // did after a later BEGIN succeeded is rolled back, and the caller hears of it.
            if !begin.neverStarted { _ = try? await execute(script: "ROLLBACK") }
            throw PostgresError(
                .server,
                sqlState: .inFailedSQLTransaction,
                message: "the transaction was not committed, because sending its BEGIN failed"
            )
        }
        if begin.neverStarted { return value }
        let commit = try await execute(script: "COMMIT")
        guard commit.commandTag == "COMMIT" else {
            throw PostgresError(
                .server,
                sqlState: .inFailedSQLTransaction,
                message: "the transaction was rolled back instead of committed, because a statement inside it failed"
            )
        }
        return value
    }
}

/// Transaction isolation levels.
public enum IsolationLevel: String, Sendable {
    case readCommitted = "READ COMMITTED"
    case repeatableRead = "REPEATABLE READ"
    case serializable = "SERIALIZABLE"
}
