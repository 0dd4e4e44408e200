import Foundation
import Postgres

/// The database server's clock: the one clock of state that several processes (or hosts whose
/// clocks disagree) write, such as the shared App Store slots and operator decisions.
enum DatabaseClock {
    /// `clock_timestamp()` on `connection` (inside a transaction: the time now, not its start).
    static func now(on connection: Connection) async throws -> Date {
        let rows = try await connection.preparedQuery("SELECT clock_timestamp()")
        guard let row = rows.first else { throw PostgresError(.client, message: "SELECT clock_timestamp() returned no row") }
        return try row.decode(Date.self, at: 0)
    }
}
