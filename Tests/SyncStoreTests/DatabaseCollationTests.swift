import Postgres
@testable import SyncStore
import TestSupport
import Testing

/// `serve`'s look at how the database compares text, against databases created each way.
@Suite struct DatabaseCollationTests {
    @Test(arguments: ["C", "POSIX"])
    func bytewiseCollationsAreNotReported(_ collation: String) async throws {
        try await TestDatabase.withFreshDatabase(
            creating: "TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER libc LC_COLLATE '\(collation)' LC_CTYPE 'C.UTF-8'"
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
            creating: "TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER libc LC_COLLATE 'C.UTF-8' LC_CTYPE 'C.UTF-8'"
        ) { configuration in
            try await TestDatabase.withConnection(configuration) { connection in
                let collation = try await DatabaseCollation.nonBytewise(on: connection)
                #expect(collation == "C.UTF-8")
            }
        }
    }

    /// The providers this server may not have: ICU compares through its locale whatever
    /// `datcollate` says; PostgreSQL 17's builtin provider compares code points bytewise.
    @Test func providersAreReadBeforeTheLibcCollation() {
        #expect(DatabaseCollation.describe(collation: "C", provider: "i", locale: "und-x-icu") == "ICU und-x-icu")
        #expect(DatabaseCollation.describe(collation: "en_US.UTF-8", provider: "b", locale: "C.UTF-8") == nil)
        #expect(DatabaseCollation.describe(collation: "en_US.UTF-8", provider: "c", locale: nil) == "en_US.UTF-8")
        #expect(DatabaseCollation.describe(collation: "POSIX", provider: nil, locale: nil) == nil)
        #expect(DatabaseCollation.describe(collation: "C.UTF-8", provider: nil, locale: nil) == "C.UTF-8")
    }
}
