import Postgres
import NIOConcurrencyHelpers

/// Whether the database is a Citus coordinator, asked once and remembered: the few statements
/// that have a faster single-server form (the delivery claim, `holdBlocked`, a worker's account
/// locks) use that form on one PostgreSQL and their Citus form (sql/0014) on a cluster (docs/CITUS.md,
/// "How the pipeline runs on Citus").
///
/// A database is a Citus one when the `citus` extension is installed in it; the answer is kept
/// for the life of the process (an extension is not installed under a running service).
public final class DatabaseTopology: Sendable {
    /// `nil` until the first answer.
    private let citus = NIOLockedValueBox<Bool?>(nil)

    public init() {}

    /// Whether `pool`'s database has the `citus` extension.
    func isCitus(_ pool: ConnectionPool) async throws -> Bool {
        if let known = citus.withLockedValue({ $0 }) { return known }
        return try remember(try await pool.preparedQuery(Self.question))
    }

    /// Whether `connection`'s database has the `citus` extension: for callers inside a
    /// transaction, which must not wait for a second connection of a pool their own may exhaust.
    func isCitus(on connection: Connection) async throws -> Bool {
        if let known = citus.withLockedValue({ $0 }) { return known }
        return try remember(try await connection.preparedQuery(Self.question))
    }

    private static let question: PostgresQuery = "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')"

    private func remember(_ rows: QueryResult) throws -> Bool {
        let answer = try rows[0].decode(Bool.self, at: 0)
        citus.withLockedValue { $0 = answer }
        return answer
    }
}
