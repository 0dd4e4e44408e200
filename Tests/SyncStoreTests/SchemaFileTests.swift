import Foundation
import Postgres
import SyncStore
import TestSupport
import Testing

/// sql/schema.sql is the schema every migration makes, dumped by `scripts/schema`: a fresh
/// database migrated here dumps to exactly the committed file, and a schema that differs by one
/// index does not.
@Suite("sql/schema.sql")
struct SchemaFileTests {
    static let root = TestPackage.root

    /// The normalized dump of the database `configuration` names, as `scripts/schema` writes it.
    static func dump(_ configuration: ConnectionConfiguration) async throws -> String {
        let conninfo = configuration.parameters.map { "\($0.key)='\($0.value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'"))'" }
            .joined(separator: " ")
        let run = try await runProcess(root.appendingPathComponent("scripts/schema").path, ["--dump", conninfo], directory: root)
        #expect(run.status == 0, "\(run.output)")
        return run.stdout
    }

    @Test("a freshly migrated database dumps to exactly sql/schema.sql; one more index makes it differ")
    func schemaFileMatchesTheMigrations() async throws {
        let committed = try String(contentsOf: Self.root.appendingPathComponent("sql/schema.sql"), encoding: .utf8)
        #expect(committed.contains("CREATE TABLE public.reports"), "the file holds the tables")
        #expect(committed.contains("CREATE FUNCTION public."), "the file holds the functions")
        try await TestDatabase.withFreshDatabase { configuration in
            try await TestDatabase.withConnection(configuration) { connection in
                try await Migrator().migrate(connection: connection)
                let dumped = try await Self.dump(configuration)
                #expect(dumped == committed, "sql/schema.sql disagrees with the migrations: run scripts/schema and commit it")

                try await connection.execute(script: "CREATE INDEX schema_file_test_extra ON reports (observed_at)")
                let changed = try await Self.dump(configuration)
                #expect(changed != committed)
                #expect(changed.contains("schema_file_test_extra"))
            }
        }
    }
}
