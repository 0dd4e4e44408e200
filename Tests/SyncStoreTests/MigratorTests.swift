import Foundation
import Postgres
import SyncStore
import TestSupport
import Testing

/// The migrations runner against a real server, each test in a database of its own.
@Suite struct MigratorTests {
    static func tables(_ connection: Connection) async throws -> [String] {
        let rows = try await connection.query(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1"
        )
        return try rows.map { try $0.decode(String.self, at: 0) }
    }

    static func recorded(_ connection: Connection) async throws -> [(version: Int, name: String)] {
        let rows = try await connection.query("SELECT version, name FROM schema_migrations ORDER BY version")
        return try rows.map { (try $0.decode(Int.self, at: 0), try $0.decode(String.self, at: 1)) }
    }

    @Test func migratingTwiceIsANoOp() async throws {
        try await TestDatabase.withFreshDatabase { configuration in
            let pool = ConnectionPool(configuration: .init(connection: configuration, maximumConnections: 2))
            let migrator = Migrator()
            let names = Migration.embedded.map(\.name)
            #expect(!names.isEmpty)

            let first = try await migrator.migrate(pool: pool)
            #expect(first.applied == names)
            #expect(first.alreadyApplied.isEmpty)
            #expect(first.unknownVersions.isEmpty)

            let second = try await migrator.migrate(pool: pool)
            #expect(second.applied.isEmpty)
            #expect(second.alreadyApplied == names)

            try await pool.withConnection { connection in
                let recorded = try await Self.recorded(connection)
                #expect(recorded.map(\.version) == Migration.embedded.map(\.version))
                #expect(recorded.map(\.name) == names)
                let tables = try await Self.tables(connection)
                for table in ["schema_migrations", "reports", "devices", "webhook_endpoints"] {
                    #expect(tables.contains(table), "\(table) missing from \(tables)")
                }
                #expect(try await migrator.pending(connection: connection).isEmpty)
                // The stored checksum is the SHA-256 of the file's UTF-8 text.
                let checksums = try await migrator.appliedVersions(connection: connection)
                for migration in Migration.embedded {
                    let expected = try await connection.query(
                        "SELECT encode(sha256(convert_to(\(migration.sql), 'UTF8')), 'hex')"
                    )[0].decode(String.self, at: 0)
                    #expect(checksums[migration.version] == expected)
                }
            }
            await pool.close()
        }
    }

    @Test func concurrentRunsApplyOnce() async throws {
        try await TestDatabase.withFreshDatabase { configuration in
            let first = try await Connection.connect(configuration: configuration)
            let second = try await Connection.connect(configuration: configuration)
            let migrator = Migrator()
            async let a = migrator.migrate(connection: first)
            async let b = migrator.migrate(connection: second)
            let outcomes = try await [a, b]
            let names = Migration.embedded.map(\.name)
            #expect(outcomes.filter { !$0.applied.isEmpty }.count == 1, "\(outcomes)")
            #expect(outcomes.contains { $0.applied == names })
            #expect(outcomes.contains { $0.applied.isEmpty && $0.alreadyApplied == names })
            let recorded = try await Self.recorded(first)
            #expect(recorded.map(\.name) == names)
            // The advisory lock was released by both.
            let locks = try await first.query("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")
            #expect(try locks[0].decode(Int.self, at: 0) == 0)
            await first.close()
            await second.close()
        }
    }

    @Test func manyConcurrentRunsOnNewMigrations() async throws {
        try await TestDatabase.withFreshDatabase { configuration in
            let migrations = (1...5).map { version in
                Migration(
                    version: version, name: String(format: "%04d_step", version),
                    sql: "CREATE TABLE step_\(version) (id int PRIMARY KEY); SELECT pg_sleep(0.02);"
                )
            }
            let migrator = Migrator(migrations: migrations)
            let outcomes = try await withThrowingTaskGroup(of: Migrator.Outcome.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        try await TestDatabase.withConnection(configuration) { try await migrator.migrate(connection: $0) }
                    }
                }
                var all: [Migrator.Outcome] = []
                for try await outcome in group { all.append(outcome) }
                return all
            }
            #expect(outcomes.flatMap(\.applied).sorted() == migrations.map(\.name))
            try await TestDatabase.withConnection(configuration) { connection in
                let versions = try await Self.recorded(connection).map(\.version)
                #expect(versions == [1, 2, 3, 4, 5])
            }
        }
    }

    @Test func tamperedAppliedMigrationIsRefused() async throws {
        try await TestDatabase.withFreshDatabase { configuration in
            try await TestDatabase.withConnection(configuration) { connection in
                try await Migrator().migrate(connection: connection)
                let tablesBefore = try await Self.tables(connection)
                let recordedBefore = try await Self.recorded(connection)

                var tampered = Migration.embedded
                tampered[0].sql += "\nCREATE TABLE sneaky (id int);\n"
                // A new, pending migration must not run either.
                tampered.append(Migration(version: 9_999, name: "9999_pending", sql: "CREATE TABLE pending_one (id int);"))
                let error = await thrownError { try await Migrator(migrations: tampered).migrate(connection: connection) }
                let migrationError = try #require(error as? MigrationError, "got \(String(describing: error))")
                #expect(migrationError == .checksumMismatch(version: 1, name: tampered[0].name))

                #expect(try await Self.tables(connection) == tablesBefore)
                #expect(try await Self.recorded(connection).map(\.version) == recordedBefore.map(\.version))
                // Whitespace counts too: the file must be byte-for-byte what ran.
                var trailingSpace = Migration.embedded
                trailingSpace[0].sql += " "
                let whitespace = await thrownError { try await Migrator(migrations: trailingSpace).migrate(connection: connection) }
                #expect(whitespace as? MigrationError == .checksumMismatch(version: 1, name: trailingSpace[0].name))
                // And the lock is free again for the untampered migrator.
                #expect(try await Migrator().migrate(connection: connection).applied.isEmpty)
            }
        }
    }

    /// A LATIN1 database migrated by a release whose sessions used the database's encoding
    /// holds the hashes of its files as that encoding read their UTF-8 bytes ("§" as "Â§", in
    /// 0001 and 0014). Those are accepted and replaced by the true ones; any other stored hash
    /// still stops everything.
    @Test func checksumsStoredInTheDatabasesEncodingAreAccepted() async throws {
        try await TestDatabase.withFreshDatabase(creating: "ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0") { configuration in
            try await TestDatabase.withConnection(configuration) { connection in
                let migrator = Migrator()
                #expect(try await migrator.migrate(connection: connection).applied.count == Migration.embedded.count)
                let nonASCII = Migration.embedded.filter { $0.sql.unicodeScalars.contains { !$0.isASCII } }
                #expect(!nonASCII.isEmpty, "no migration has a non-ASCII character: this test checks nothing")
                let current = try await migrator.appliedVersions(connection: connection)
                // What an earlier release stored.
                for migration in nonASCII {
                    try await connection.query(
                        """
                        UPDATE schema_migrations
                        SET checksum = encode(sha256(convert_to(convert_from(convert_to(\(migration.sql), 'UTF8'), 'LATIN1'), 'UTF8')), 'hex')
                        WHERE version = \(migration.version)
                        """)
                }
                let legacy = try await migrator.appliedVersions(connection: connection)
                for migration in nonASCII { #expect(legacy[migration.version] != current[migration.version]) }

                let again = try await migrator.migrate(connection: connection)
                #expect(again.applied.isEmpty)
                #expect(again.alreadyApplied.count == Migration.embedded.count)
                #expect(try await migrator.appliedVersions(connection: connection) == current)

                try await connection.query("UPDATE schema_migrations SET checksum = 'not-a-hash' WHERE version = \(nonASCII[0].version)")
                await #expect(throws: MigrationError.checksumMismatch(version: nonASCII[0].version, name: nonASCII[0].name)) {
                    try await migrator.migrate(connection: connection)
                }
            }
        }
    }

    @Test func failingMigrationRollsBackEntirely() async throws {
        try await TestDatabase.withFreshDatabase { configuration in
            let good = Migration(version: 1, name: "0001_good", sql: "CREATE TABLE good (id int PRIMARY KEY);")
            let bad = Migration(
                version: 2, name: "0002_bad",
                sql: """
                    CREATE TABLE partial (id int PRIMARY KEY);
                    INSERT INTO partial VALUES (1);
                    INSERT INTO good VALUES (1);
                    SELECT * FROM no_such_table;
                    """
            )
            let later = Migration(version: 3, name: "0003_later", sql: "CREATE TABLE later (id int);")
            try await TestDatabase.withConnection(configuration) { connection in
                let error = await thrownError { try await Migrator(migrations: [good, bad, later]).migrate(connection: connection) }
                let migrationError = try #require(error as? MigrationError, "got \(String(describing: error))")
                guard case .failed(let version, let name, let message) = migrationError else {
                    Issue.record("expected .failed, got \(migrationError)")
                    return
                }
                #expect(version == 2 && name == "0002_bad")
                #expect(message.contains("42P01") || message.contains("no_such_table"), "\(message)")

                let tables = try await Self.tables(connection)
                #expect(tables.contains("good"))
                #expect(!tables.contains("partial"))
                #expect(!tables.contains("later"), "a migration after the failed one ran")
                #expect(try await connection.query("SELECT count(*) FROM good")[0].decode(Int.self, at: 0) == 0)
                #expect(try await Self.recorded(connection).map(\.version) == [1])
                let locks = try await connection.query("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")
                #expect(try locks[0].decode(Int.self, at: 0) == 0)

                // Fixing the file lets the run continue where it stopped.
                var fixed = bad
                fixed.sql = "CREATE TABLE partial (id int PRIMARY KEY);"
                let outcome = try await Migrator(migrations: [good, fixed, later]).migrate(connection: connection)
                #expect(outcome.applied == ["0002_bad", "0003_later"])
                #expect(outcome.alreadyApplied == ["0001_good"])
            }
        }
    }

    @Test func unknownVersionsAreReported() async throws {
        try await TestDatabase.withFreshDatabase { configuration in
            try await TestDatabase.withConnection(configuration) { connection in
                let one = Migration(version: 1, name: "0001_one", sql: "CREATE TABLE one (id int);")
                let two = Migration(version: 2, name: "0002_two", sql: "CREATE TABLE two (id int);")
                try await Migrator(migrations: [one, two]).migrate(connection: connection)
                let outcome = try await Migrator(migrations: [one]).migrate(connection: connection)
                #expect(outcome.unknownVersions == [2])
                #expect(outcome.applied.isEmpty)
            }
        }
    }

    @Test func embeddedMigrationsMatchTheSQLFolder() throws {
        let folder = TestPackage.file("sql")
        let files = try Migration.load(from: folder)
        #expect(!files.isEmpty)
        #expect(files.map(\.version) == Migration.embedded.map(\.version))
        for (file, embedded) in zip(files, Migration.embedded) {
            #expect(file.name == embedded.name)
            #expect(Array(file.sql.utf8) == Array(embedded.sql.utf8), "\(file.name) differs from the embedded copy")
        }
        #expect(Migration.embedded.map(\.version) == Array(1...Migration.embedded.count), "versions are 1, 2, 3, ... without gaps")
    }

    @Test func loadRejectsBadFolders() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pgt-sql-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try "SELECT 1;".write(to: folder.appendingPathComponent("0002_second.sql"), atomically: true, encoding: .utf8)
        try "SELECT 1;".write(to: folder.appendingPathComponent("0001_first.sql"), atomically: true, encoding: .utf8)
        try "notes".write(to: folder.appendingPathComponent("README.md"), atomically: true, encoding: .utf8)
        #expect(try Migration.load(from: folder).map(\.name) == ["0001_first", "0002_second"])

        try "SELECT 1;".write(to: folder.appendingPathComponent("0002_again.sql"), atomically: true, encoding: .utf8)
        #expect(throws: MigrationError.duplicateVersion(2, "0002_again", "0002_second")) { try Migration.load(from: folder) }
        try FileManager.default.removeItem(at: folder.appendingPathComponent("0002_again.sql"))

        try "SELECT 1;".write(to: folder.appendingPathComponent("3_bad.sql"), atomically: true, encoding: .utf8)
        #expect(throws: MigrationError.badFileName("3_bad.sql")) { try Migration.load(from: folder) }
    }
}
