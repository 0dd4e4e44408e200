import Logging
import Postgres

/// Applies pending migrations.
///
/// - Each migration runs in its own transaction, together with its row in `schema_migrations`,
///   so it is applied entirely or not at all.
/// - A session advisory lock serialises concurrent runs: when two processes migrate at once,
///   the second waits, then finds nothing left to do.
/// - The checksum (SHA-256, computed by the server, all files in one statement) of every applied
///   file is compared with the file's text now; a difference stops everything before anything runs.
public struct Migrator: Sendable {
    /// `pg_advisory_lock` key: "subsync" in ASCII, so it will not collide by accident.
    static let advisoryLockKey: Int64 = 0x7375_6273_796e_63

    public let migrations: [Migration]
    let logger: Logger

    public init(migrations: [Migration] = Migration.embedded, logger: Logger = Logger(label: "subsync.migrate")) {
        self.migrations = migrations.sorted { $0.version < $1.version }
        self.logger = logger
    }

    /// What a run did.
    public struct Outcome: Sendable, Equatable {
        /// Migrations applied by this run, in order.
        public var applied: [String]
        /// Migrations that were already there.
        public var alreadyApplied: [String]
        /// Versions found in the database that this binary does not know (a newer binary ran).
        public var unknownVersions: [Int]
    }

    /// Applies every pending migration over one connection of `pool`.
    @discardableResult
    public func migrate(pool: ConnectionPool) async throws -> Outcome {
        try await pool.withConnection { try await migrate(connection: $0) }
    }

    /// Applies every pending migration over `connection`.
    @discardableResult
    public func migrate(connection: Connection) async throws -> Outcome {
        try await connection.query("SELECT pg_advisory_lock(\(Self.advisoryLockKey))")
        do {
            let outcome = try await migrateHoldingLock(connection)
            try await connection.query("SELECT pg_advisory_unlock(\(Self.advisoryLockKey))")
            return outcome
        } catch {
            _ = try? await connection.query("SELECT pg_advisory_unlock(\(Self.advisoryLockKey))")
            throw error
        }
    }

    /// The versions applied so far with their checksums (empty when never migrated).
    public func appliedVersions(connection: Connection) async throws -> [Int: String] {
        try await ensureTable(connection)
        let rows = try await connection.query("SELECT version, checksum FROM schema_migrations")
        var applied: [Int: String] = [:]
        for row in rows {
            applied[try row.decode(Int.self, at: 0)] = try row.decode(String.self, at: 1)
        }
        return applied
    }

    /// The migrations not yet applied.
    public func pending(connection: Connection) async throws -> [Migration] {
        let applied = try await appliedVersions(connection: connection)
        return migrations.filter { applied[$0.version] == nil }
    }

    private func ensureTable(_ connection: Connection) async throws {
        try await connection.execute(
            script: """
                SET client_min_messages = warning;
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version     integer     NOT NULL PRIMARY KEY,
                    name        text        NOT NULL,
                    checksum    text        NOT NULL,
                    applied_at  timestamptz NOT NULL DEFAULT now()
                );
                RESET client_min_messages;
                """
        )
    }

    /// The checksums of every file, computed by the server as `encode(sha256(convert_to(sql,
    /// 'UTF8')), 'hex')`, in one statement (it was one statement per file, 25 round trips at
    /// every start), with the checksum an earlier release stored for it in this database.
    ///
    /// Earlier releases left the session's client encoding at the database's: in a database
    /// whose encoding is neither UTF-8 nor SQL_ASCII (LATIN1, say) the server took each UTF-8
    /// byte of a file for a character, and stored the hash of that text ("§" hashed as "Â§").
    /// Sessions are UTF-8 now (``ConnectionConfiguration``), so the same file hashes to its
    /// true checksum; `legacy` is the earlier one, accepted for a file applied before and then
    /// stored as the true one (`migrateHoldingLock`). In a UTF-8 or SQL_ASCII database there is
    /// none (nil: the two are the same, and the file is not hashed twice at every start).
    private func checksums(on connection: Connection) async throws -> [Int: (current: String, legacy: String?)] {
        let rows = try await connection.query(
            """
            SELECT n, encode(sha256(convert_to(t, 'UTF8')), 'hex'),
                   CASE WHEN current_setting('server_encoding') NOT IN ('UTF8', 'SQL_ASCII')
                        THEN encode(sha256(convert_to(convert_from(convert_to(t, 'UTF8'), current_setting('server_encoding')), 'UTF8')), 'hex')
                   END
            FROM unnest(\(migrations.map(\.sql))::text[]) WITH ORDINALITY AS m(t, n)
            """
        )
        var sums: [Int: (current: String, legacy: String?)] = [:]
        for row in rows {
            let index = try row.decode(Int.self, at: 0) - 1
            guard migrations.indices.contains(index) else { continue }
            sums[migrations[index].version] = (try row.decode(String.self, at: 1), try row.decode(String?.self, at: 2))
        }
        return sums
    }

    private func migrateHoldingLock(_ connection: Connection) async throws -> Outcome {
        let applied = try await appliedVersions(connection: connection)
        var outcome = Outcome(applied: [], alreadyApplied: [], unknownVersions: [])
        let known = Set(migrations.map(\.version))
        outcome.unknownVersions = applied.keys.filter { !known.contains($0) }.sorted()
        if !outcome.unknownVersions.isEmpty {
            logger.warning(
                "the database has migrations this binary does not know; a newer subsync has migrated it",
                metadata: ["versions": "\(outcome.unknownVersions)"]
            )
        }
        // Verify every applied file first, so a tampered file stops the run before any change.
        let sums = try await checksums(on: connection)
        var rehashed: [Migration] = []
        for migration in migrations {
            guard let stored = applied[migration.version] else { continue }
            guard let sum = sums[migration.version], sum.current == stored || sum.legacy == stored else {
                throw MigrationError.checksumMismatch(version: migration.version, name: migration.name)
            }
            if sum.current != stored { rehashed.append(migration) }
            outcome.alreadyApplied.append(migration.name)
        }
        for migration in rehashed {
            guard let sum = sums[migration.version]?.current else { continue }
            try await connection.query("UPDATE schema_migrations SET checksum = \(sum) WHERE version = \(migration.version)")
        }
        if !rehashed.isEmpty {
            logger.info(
                "stored the UTF-8 checksums of migrations an earlier release hashed in the database's encoding",
                metadata: ["migrations": "\(rehashed.map(\.name))"])
        }
        // On Citus a migration's DDL on a distributed table runs over one connection per node
        // rather than one per shard, so that a function command can follow it in the same
        // transaction (Citus refuses one after a parallel operation): sql/0043, applied to a
        // cluster whose claim queue is distributed (sql/0047).
        let citus = try await connection.query("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')")
        let sequentialOnCitus = try citus[0].decode(Bool.self, at: 0)
        for migration in migrations where applied[migration.version] == nil {
            logger.info("applying migration", metadata: ["migration": "\(migration.name)"])
            guard let sum = sums[migration.version]?.current else {
                throw MigrationError.failed(version: migration.version, name: migration.name, message: "the server returned no checksum for it")
            }
            do {
                try await connection.withTransaction { connection in
                    if sequentialOnCitus { try await connection.query("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'") }
                    try await connection.execute(script: migration.sql)
                    try await connection.query(
                        "INSERT INTO schema_migrations (version, name, checksum) VALUES (\(migration.version), \(migration.name), \(sum))"
                    )
                }
            } catch let error as PostgresError where error.kind == .server {
                throw MigrationError.failed(version: migration.version, name: migration.name, message: error.description)
            }
            outcome.applied.append(migration.name)
        }
        return outcome
    }
}
