import Foundation
import Postgres
import TestSupport
import Testing

/// Bound parameters travel as data: whatever the text, it is stored and read back unchanged,
/// and it never changes the statement.
@Suite struct ParameterTests {
    static let trickyStrings: [String?] = [
        nil,
        "",
        " ",
        "plain",
        "NULL",
        "null",
        "😀👨‍👩‍👧‍👦🏳️‍🌈",
        "漢字かなカナ한국어",
        "e\u{301}",  // e + combining acute: must not be normalised to é
        "\u{e9}",
        "\u{200B}\u{FEFF}\u{202E}",
        "O'Reilly",
        "''",
        "\"double\" quotes",
        "back\\slash\\",
        "\\x00",
        "\\",
        "$1",
        "$2::int",
        "?",
        "'; DROP TABLE victim; --",
        "x'); DELETE FROM victim; --",
        "/* comment */ -- line",
        "E'\\047'",
        "{\"a\",NULL}",
        "tab\tnew\nline\rreturn\u{7}bell",
        String(repeating: "long ü ", count: 20_000),
    ]

    @Test func trickyTextRoundTripsAsData() async throws {
        try await TestDatabase.withConnection { connection in
            let table = TestDatabase.uniqueName("pgt_params")
            try await connection.execute(script: "CREATE TEMP TABLE \(table) (id int PRIMARY KEY, value text)")
            for (index, value) in Self.trickyStrings.enumerated() {
                try await connection.query("INSERT INTO \(unescaped: table) (id, value) VALUES (\(index), \(value))")
            }
            let rows = try await connection.query("SELECT id, value, octet_length(value) FROM \(unescaped: table) ORDER BY id")
            #expect(rows.count == Self.trickyStrings.count)
            for row in rows {
                let index = try row.decode(Int.self, at: 0)
                let stored = try row.decode(String?.self, at: 1)
                let expected = Self.trickyStrings[index]
                // Compare bytes: Swift's String equality would hide a normalisation.
                #expect(stored.map { Array($0.utf8) } == expected.map { Array($0.utf8) }, "row \(index)")
                #expect(try row.decode(Int?.self, at: 2) == expected?.utf8.count)
            }
            // Each value matches itself when used as a parameter in a WHERE clause.
            for (index, value) in Self.trickyStrings.enumerated() where value != nil {
                let found = try await connection.query("SELECT id FROM \(unescaped: table) WHERE value = \(value)")
                #expect(found.map { try? $0.decode(Int.self, at: 0) }.contains(index))
            }
            let exists = try await connection.query("SELECT to_regclass(\(table)) IS NOT NULL")
            #expect(try exists[0].decode(Bool.self, at: 0))
        }
    }

    @Test func injectionAttemptsDoNotChangeTheStatement() async throws {
        try await TestDatabase.withConnection { connection in
            let victim = TestDatabase.uniqueName("pgt_victim")
            try await connection.execute(script: "CREATE TEMP TABLE \(victim) (value text)")
            let attacks = [
                "'; DROP TABLE \(victim); --",
                "'); DROP TABLE \(victim); --",
                "1; DROP TABLE \(victim)",
                "$1; DROP TABLE \(victim)",
                "\\'; DROP TABLE \(victim); --",
            ]
            for attack in attacks {
                try await connection.query("INSERT INTO \(unescaped: victim) VALUES (\(attack))")
                let echoed = try await connection.query("SELECT \(attack)::text, \(attack) = \(attack)")
                #expect(try echoed[0].decode(String.self, at: 0) == attack)
                #expect(try echoed[0].decode(Bool.self, at: 1))
            }
            let rows = try await connection.query("SELECT value FROM \(unescaped: victim) ORDER BY value")
            #expect(Set(try rows.map { try $0.decode(String.self, at: 0) }) == Set(attacks))
        }
    }

    @Test func randomUnicodeTextRoundTrips() async throws {
        var generator = SeededGenerator(seed: 0x5EED_0001)
        try await TestDatabase.withConnection { connection in
            for iteration in 0..<500 {
                let text = Self.randomText(using: &generator)
                let rows = try await connection.query("SELECT \(text)::text, length(\(text)::text)")
                let back = try rows[0].decode(String.self, at: 0)
                #expect(Array(back.unicodeScalars) == Array(text.unicodeScalars), "iteration \(iteration)")
                #expect(try rows[0].decode(Int.self, at: 1) == text.unicodeScalars.count, "iteration \(iteration)")
            }
        }
    }

    /// Random text over every plane: ASCII punctuation, Latin, combining marks, CJK, emoji,
    /// private use and supplementary characters. Never NUL, never a lone surrogate.
    static func randomText(using generator: inout SeededGenerator) -> String {
        let ranges: [ClosedRange<UInt32>] = [
            0x01...0x7F, 0x20...0x7E, 0x80...0x7FF, 0x300...0x36F, 0x4E00...0x9FFF,
            0xE000...0xF8FF, 0x1F300...0x1FAFF, 0x10000...0x10FFFF,
        ]
        var scalars = String.UnicodeScalarView()
        let length = Int.random(in: 0...40, using: &generator)
        for _ in 0..<length {
            let range = ranges[Int.random(in: 0..<ranges.count, using: &generator)]
            if let scalar = Unicode.Scalar(UInt32.random(in: range, using: &generator)) {
                scalars.append(scalar)
            }
        }
        return String(scalars)
    }

    @Test func nulByteIsAnEncodingErrorNotACrash() async throws {
        try await TestDatabase.withConnection { connection in
            let error = await thrownError { try await connection.query("SELECT \("before\u{0}after")::text") }
            let postgresError = try #require(error as? PostgresError)
            #expect(postgresError.kind == .encoding)
            // The prepared path checks too, and the connection stays usable.
            let prepared = await thrownError { try await connection.preparedQuery("SELECT \("\u{0}")::text") }
            #expect((prepared as? PostgresError)?.kind == .encoding)
            let rows = try await connection.query("SELECT \("still fine")::text")
            #expect(try rows[0].decode(String.self, at: 0) == "still fine")
        }
    }

    @Test func optionalNilBindsAsNull() async throws {
        try await TestDatabase.withConnection { connection in
            let none: Int? = nil
            let some: Int? = 7
            let rows = try await connection.query("SELECT \(none)::int IS NULL, \(some)::int, \(PostgresValue.null)::text IS NULL")
            #expect(try rows[0].decode(Bool.self, at: 0))
            #expect(try rows[0].decode(Int.self, at: 1) == 7)
            #expect(try rows[0].decode(Bool.self, at: 2))
        }
    }

    /// A condition only one kind of database needs: left out without a value, with its `?` made
    /// the value's parameter with one, wherever it falls among the others.
    @Test func aConditionIsBoundOnlyWithAValue() async throws {
        try await TestDatabase.withConnection { connection in
            let keys = ["b", "c"]
            let none: [String]? = nil
            let without: PostgresQuery = "SELECT x FROM unnest(\(["a", "b", "c"])::text[]) AS t(x) WHERE x <> \("z") \(none, condition: "AND x = ANY(?::text[])") ORDER BY x"
            #expect(without.binds.count == 2)
            #expect(!without.sql.contains("ANY"))
            let all = try await connection.preparedQuery(without).map { try $0.decode(String.self, at: 0) }
            #expect(all == ["a", "b", "c"])
            let with: PostgresQuery = "SELECT x FROM unnest(\(["a", "b", "c"])::text[]) AS t(x) WHERE x <> \("z") \(keys, condition: "AND x = ANY(?::text[])") AND x <> \("c") ORDER BY x"
            #expect(with.binds.count == 4)
            #expect(with.sql.contains("AND x = ANY($3::text[]) AND x <> $4"))
            let kept = try await connection.preparedQuery(with).map { try $0.decode(String.self, at: 0) }
            #expect(kept == ["b"])
        }
    }

    @Test func preparedStatementsRebindCorrectly() async throws {
        try await TestDatabase.withConnection { connection in
            for index in 0..<60 {
                let label: String? = index % 7 == 0 ? nil : "label-\(index)-'\"\\"
                let rows = try await connection.preparedQuery(
                    "SELECT \(index)::int * 2, \(Int64(index) << 40)::bigint, \(label)::text, \(index % 2 == 0)::bool"
                )
                #expect(rows.count == 1)
                #expect(try rows[0].decode(Int.self, at: 0) == index * 2)
                #expect(try rows[0].decode(Int64.self, at: 1) == Int64(index) << 40)
                #expect(try rows[0].decode(String?.self, at: 2) == label)
                #expect(try rows[0].decode(Bool.self, at: 3) == (index % 2 == 0))
            }
            // Binary bytea binds work through the prepared path too.
            for size in [0, 1, 255, 4096] {
                let bytes = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 * 7) })
                let rows = try await connection.preparedQuery("SELECT length(\(bytes)::bytea), \(bytes)::bytea")
                #expect(try rows[0].decode(Int.self, at: 0) == size)
                #expect(try rows[0].decode(Data.self, at: 1) == bytes)
            }
            // One server-side statement per distinct SQL text, reused across binds.
            let statements = try await connection.query("SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'subsync\\_%'")
            #expect(try statements[0].decode(Int.self, at: 0) == 2)
        }
    }

    @Test func preparedStatementSurvivesRolledBackTransactionAndErrors() async throws {
        try await TestDatabase.withConnection { connection in
            struct Abort: Error {}
            _ = await thrownError {
                try await connection.withTransaction { connection in
                    let rows = try await connection.preparedQuery("SELECT \(41)::int + 1")
                    #expect(try rows[0].decode(Int.self, at: 0) == 42)
                    throw Abort()
                }
            }
            let again = try await connection.preparedQuery("SELECT \(1)::int + 1")
            #expect(try again[0].decode(Int.self, at: 0) == 2)
            // A statement that fails to prepare is not cached; a later valid one still works.
            let bad = await thrownError { try await connection.preparedQuery("SELEC \(1)") }
            #expect((bad as? PostgresError)?.sqlState == .syntaxError)
            let other = try await connection.preparedQuery("SELECT \("x")::text || 'y'")
            #expect(try other[0].decode(String.self, at: 0) == "xy")
        }
    }

    /// `cast:opaqueToPlanner:` binds the same keys either way; opaque, the plan no longer
    /// carries them (the planner sees a subquery's result, not 300 constants to estimate one by
    /// one), and the rows found are the same, prepared or not, with a NULL key and a quote.
    @Test func keysOpaqueToThePlannerFindTheSameRows() async throws {
        try await TestDatabase.withConnection { connection in
            let table = TestDatabase.uniqueName("pgt_opaque")
            try await connection.execute(script: """
                CREATE TEMP TABLE \(table) (key text PRIMARY KEY, n int);
                INSERT INTO \(table) SELECT 'k' || g, g FROM generate_series(1, 2000) AS g;
                INSERT INTO \(table) VALUES ('it''s', 0);
                ANALYZE \(table)
                """)
            let keys: [String?] = (1...300).map { "k\($0 * 5)" } + ["it's", nil, "missing"]
            var answers: [[Int]] = []
            for opaque in [false, true] {
                let query: PostgresQuery =
                    "SELECT n FROM \(unescaped: table) WHERE key = ANY(\(keys, cast: "text[]", opaqueToPlanner: opaque)) ORDER BY n"
                #expect(query.sql.contains("(SELECT $1::text[])::text[]") == opaque, "\(query.sql)")
                for prepared in [false, true] {
                    let rows = prepared ? try await connection.preparedQuery(query) : try await connection.query(query)
                    answers.append(try rows.map { try $0.decode(Int.self, at: 0) })
                }
                var explain = query
                explain.sql = "EXPLAIN (COSTS OFF) " + explain.sql
                let plan = try await connection.query(explain).map { try $0.decode(String.self, at: 0) }.joined(separator: "\n")
                // A custom plan holds the constant array; an opaque one a parameter of its InitPlan.
                #expect(plan.contains("k1495") == !opaque, "\(plan)")
                #expect(plan.contains("InitPlan") == opaque, "\(plan)")
            }
            #expect(answers.count == 4)
            #expect(answers.allSatisfy { $0 == [0] + (1...300).map { $0 * 5 } })
        }
    }
}
