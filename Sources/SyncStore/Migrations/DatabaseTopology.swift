import Postgres
import Synchronization

/// Whether the database is a Citus coordinator, asked once and remembered: the few statements
/// that have a faster single-server form (the delivery claim, `holdBlocked`) use that form on one
/// PostgreSQL and their Citus form (sql/0014) on a cluster (README "Running on Citus").
///
/// A database is a Citus one when the `citus` extension is installed in it; the answer is kept
/// for the life of the process (an extension is not installed under a running service).
public final class DatabaseTopology: Sendable {
    /// `nil` until the first answer.
    private let citus = Mutex<Bool?>(nil)

    public init() {}

    /// Whether `pool`'s database has the `citus` extension.
    func isCitus(_ pool: ConnectionPool) async throws -> Bool {
        if let known = citus.withLock({ $0 }) { return known }
        let rows = try await pool.preparedQuery("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')")
        let answer = try rows[0].decode(Bool.self, at: 0)
        citus.withLock { $0 = answer }
        return answer
    }
}
