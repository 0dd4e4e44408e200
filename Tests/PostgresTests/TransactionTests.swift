import Foundation
@testable import Postgres
import TestSupport
import Testing

/// `withTransaction` commits what the body did, or nothing at all.
@Suite struct TransactionTests {
    struct Abort: Error {}

    /// Runs `body` with a fresh real table (visible to other connections), dropped afterwards.
    func withTable(_ body: (String, Connection, Connection) async throws -> Void) async throws {
        let table = TestDatabase.uniqueName("pgt_tx")
        try await TestDatabase.withConnection { connection in
            try await TestDatabase.withConnection { observer in
                try await connection.execute(script: "CREATE TABLE \(table) (id int PRIMARY KEY, note text)")
                do {
                    try await body(table, connection, observer)
                } catch {
                    _ = try? await observer.execute(script: "DROP TABLE IF EXISTS \(table)")
                    throw error
                }
                try await observer.execute(script: "DROP TABLE IF EXISTS \(table)")
            }
        }
    }

    func count(_ table: String, on connection: Connection) async throws -> Int {
        let rows = try await connection.query("SELECT count(*) FROM \(unescaped: table)")
        return try rows[0].decode(Int.self, at: 0)
    }

    @Test func commitsTheBody() async throws {
        try await withTable { table, connection, observer in
            let value = try await connection.withTransaction { connection in
                try await connection.query("INSERT INTO \(unescaped: table) VALUES (1, 'a'), (2, 'b')")
                // Not visible elsewhere before the commit.
                #expect(try await count(table, on: observer) == 0)
                return 42
            }
            #expect(value == 42)
            #expect(try await count(table, on: observer) == 2)
            #expect(connection.isReusable())
        }
    }

    @Test func rollsBackWhenTheBodyThrows() async throws {
        try await withTable { table, connection, observer in
            let error = await thrownError {
                try await connection.withTransaction { connection in
                    try await connection.query("INSERT INTO \(unescaped: table) VALUES (1, 'a')")
                    throw Abort()
                }
            }
            #expect(error is Abort)
            #expect(try await count(table, on: observer) == 0)
            #expect(connection.isReusable(), "the connection is back outside a transaction")
            try await connection.query("INSERT INTO \(unescaped: table) VALUES (1, 'again')")
            #expect(try await count(table, on: observer) == 1, "autocommit resumed after the rollback")
        }
    }

    @Test func rollsBackOnAServerError() async throws {
        try await withTable { table, connection, observer in
            let error = await thrownError {
                try await connection.withTransaction { connection in
                    try await connection.query("INSERT INTO \(unescaped: table) VALUES (1, 'a')")
                    try await connection.query("INSERT INTO \(unescaped: table) VALUES (1, 'duplicate')")
                }
            }
            #expect((error as? PostgresError)?.sqlState == .uniqueViolation)
            let remaining = try await count(table, on: observer)
            #expect(remaining == 0)
            #expect(connection.isReusable())
        }
    }

    @Test func aSwallowedServerErrorDoesNotLookLikeACommit() async throws {
        try await withTable { table, connection, observer in
            // The body catches the failure and returns normally; the server has aborted the
            // transaction, so COMMIT really rolls back. That must surface as an error, not as
            // a silent loss of the first insert.
            let error = await thrownError {
                try await connection.withTransaction { connection in
                    try await connection.query("INSERT INTO \(unescaped: table) VALUES (1, 'a')")
                    _ = try? await connection.query("SELECT 1/0")
                }
            }
            #expect(error is PostgresError, "withTransaction returned as if committed")
            let remaining = try await count(table, on: observer)
            #expect(remaining == 0)
            #expect(connection.isReusable())
        }
    }

    @Test func isolationLevelIsApplied() async throws {
        try await TestDatabase.withConnection { connection in
            for level in [IsolationLevel.readCommitted, .repeatableRead, .serializable] {
                let current = try await connection.withTransaction(isolation: level) { connection in
                    try await connection.query("SHOW transaction_isolation")[0].decode(String.self, at: 0)
                }
                #expect(current.uppercased() == level.rawValue)
            }
        }
    }

    /// `BEGIN` travels with the body's first statement: that statement already runs inside the
    /// transaction (what it writes is invisible elsewhere until the commit).
    @Test func theFirstStatementRunsInsideTheTransaction() async throws {
        try await withTable { table, connection, observer in
            try await connection.withTransaction { connection in
                try await connection.query("INSERT INTO \(unescaped: table) VALUES (1, 'a')")
                #expect(try await count(table, on: observer) == 0, "the first statement committed on its own")
                #expect(connection.isReusable() == false, "inside a transaction block after the first statement")
            }
            #expect(try await count(table, on: observer) == 1)
            #expect(connection.isReusable())
        }
    }

    /// A body that runs no statement opens no transaction, and one that throws before its first
    /// statement leaves nothing behind: the next statement is not inside a stale transaction.
    @Test func aBodyWithoutStatementsSendsNothing() async throws {
        try await withTable { table, connection, observer in
            let value = try await connection.withTransaction { _ in 7 }
            #expect(value == 7)
            let error = await thrownError {
                try await connection.withTransaction { _ in throw Abort() }
            }
            #expect(error is Abort)
            try await connection.query("INSERT INTO \(unescaped: table) VALUES (1, 'autocommit')")
            #expect(try await count(table, on: observer) == 1, "a deferred BEGIN leaked into the next statement")
            #expect(connection.isReusable())
            let status = try await connection.query("SELECT txid_current_if_assigned() IS NULL")
            #expect(try status[0].decode(Bool.self, at: 0), "no transaction left open")
        }
    }

    /// A `BEGIN` that fails fails the statement carrying it and stays pending: the body's next
    /// statement tries it again rather than running outside the transaction, and a body that
    /// swallows the failure still gets an error from `withTransaction`, nothing committed.
    @Test func aFailedBeginNeverLetsTheBodyRunOutsideTheTransaction() async throws {
        try await withTable { table, connection, observer in
            let error = await thrownError {
                try await connection.withTransaction { connection in
                    // The transaction's own BEGIN replaced by one the server refuses.
                    connection.beginWithNextStatement("BEGIN ISOLATION LEVEL NONSENSE")
                    let first = await thrownError {
                        try await connection.query("INSERT INTO \(unescaped: table) VALUES (1, 'a')")
                    }
                    #expect((first as? PostgresError)?.sqlState == .syntaxError, "\(String(describing: first))")
                    #expect(connection.isReusable() == false, "the failed BEGIN is still pending")
                    _ = try? await connection.query("INSERT INTO \(unescaped: table) VALUES (2, 'b')")
                }
            }
            #expect((error as? PostgresError)?.sqlState == .inFailedSQLTransaction, "\(String(describing: error))")
            #expect(try await count(table, on: observer) == 0, "a statement ran in autocommit after a failed BEGIN")
            #expect(connection.isReusable())
            try await connection.query("INSERT INTO \(unescaped: table) VALUES (3, 'autocommit')")
            #expect(try await count(table, on: observer) == 1)
        }
    }
}
