import Postgres
import SyncStore
import TestSupport
import Testing

/// `serve`'s look at how the database compares text, against databases created each way.
@Suite struct DatabaseCollationTests {
    @Test(arguments: ["C", "POSIX"])
    func bytewiseCollationsAreNotReported(_ collation: String) async throws {
        try await TestDatabase.withFreshDatabase(
            creating: "TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE '\(collation)' LC_CTYPE 'C.UTF-8'"
        ) { configuration in
            try await TestDatabase.withConnection(configuration) { connection in
                let collation = try await DatabaseCollation.nonBytewise(on: connection)
                #expect(collation == nil)
            }
        }
    }

    /// C.UTF-8 orders like C under glibc, yet PostgreSQL compares through the locale for it.
    @Test func aLocaleCollationIsNamed() async throws {
        try await TestDatabase.withFreshDatabase(
            creating: "TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C.UTF-8' LC_CTYPE 'C.UTF-8'"
        ) { configuration in
            try await TestDatabase.withConnection(configuration) { connection in
                let collation = try await DatabaseCollation.nonBytewise(on: connection)
                #expect(collation == "C.UTF-8")
            }
        }
    }

    /// The databases subsync's scripts and embedded server create compare bytewise.
    @Test func theTestServerCreatesBytewiseDatabases() async throws {
        try await TestDatabase.withFreshDatabase { configuration in
            try await TestDatabase.withConnection(configuration) { connection in
                let collation = try await DatabaseCollation.nonBytewise(on: connection)
                #expect(collation == nil)
            }
        }
    }
}
