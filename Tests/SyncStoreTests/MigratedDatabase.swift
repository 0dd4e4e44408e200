import Postgres
import SyncStore
import TestSupport

/// A fresh database with every migration applied, for a test of one store: `body` gets a pool
/// of two connections on it (for the store) and a connection of its own (to set rows up and read
/// them back). The pool is closed and the database dropped afterwards, whatever `body` does.
func withMigratedDatabase(_ body: (ConnectionPool, Connection) async throws -> Void) async throws {
    try await TestDatabase.withFreshDatabase { configuration in
        try await TestDatabase.withConnection(configuration) { connection in
            try await Migrator().migrate(connection: connection)
            let pool = ConnectionPool(configuration: .init(connection: configuration, maximumConnections: 2))
            do {
                try await body(pool, connection)
            } catch {
                await pool.close()
                throw error
            }
            await pool.close()
        }
    }
}
