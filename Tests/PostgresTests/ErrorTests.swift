import Foundation
import Postgres
import TestSupport
import Testing

/// Errors carry the SQLSTATE a caller can act on and never leak secrets or row values into
/// their plain description.
@Suite struct ErrorTests {
    func serverError(_ sql: PostgresQuery, on connection: Connection) async throws -> PostgresError {
        let error = await thrownError { try await connection.query(sql) }
        return try #require(error as? PostgresError, "expected a PostgresError, got \(String(describing: error))")
    }

    @Test func syntaxAndMissingObjects() async throws {
        try await TestDatabase.withConnection { connection in
            let syntax = try await serverError("SELEC 1", on: connection)
            #expect(syntax.kind == .server)
            #expect(syntax.sqlState == .syntaxError)
            #expect(!syntax.isConnectionLoss)
            let missing = try await serverError("SELECT * FROM pgt_no_such_table_at_all", on: connection)
            #expect(missing.kind == .server)
            #expect(missing.sqlState == .undefinedTable)
            let column = try await serverError("SELECT no_such_column FROM pg_class", on: connection)
            #expect(column.sqlState == .undefinedColumn)
            let script = await thrownError { try await connection.execute(script: "SELECT 1; SELEC 2") }
            #expect((script as? PostgresError)?.sqlState == .syntaxError)
            // The connection is still good after errors.
            #expect(try await connection.query("SELECT 1")[0].decode(Int.self, at: 0) == 1)
        }
    }

    /// Citus's messages about a node that failed under a statement (raised here as Citus raises
    /// them, `XX000`) are transient; other internal errors are not.
    @Test func remoteNodeFailuresAreTransient() async throws {
        try await TestDatabase.withConnection { connection in
            let failures = [
                "connection to the remote node subsync@127.0.0.1:40001 failed with the following error: Connection refused",
                "failure on connection marked as essential: 127.0.0.1:40001",
                "failed to prepare transaction 'citus_0_1234_5_6' on host 127.0.0.1:40001",
                "could not commit transaction for shard 102008 on any active node",
                "cannot connect to 127.0.0.1:40001 to fetch intermediate results",
                "SSL SYSCALL error: EOF detected",
            ]
            for message in failures {
                let error = try await serverError(
                    "DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'XX000', MESSAGE = \(unescaped: "'" + message.replacingOccurrences(of: "'", with: "''") + "'"); END $$",
                    on: connection)
                #expect(error.sqlState == .internalError, "\(message)")
                #expect(error.isRemoteNodeFailure, "\(message)")
                #expect(error.isTransient, "\(message)")
                #expect(!error.isConnectionLoss, "the coordinator's connection stays usable: \(message)")
            }
            // A shard that broke off during the COPY that carries a statement's rows.
            for message in [
                "failed to COPY to shard 102462 on 127.0.0.1:45059", "Failed to COPY to destination shard public.reports_102462",
                "failed to complete COPY on 127.0.0.1:45059",
            ] {
                let error = try await serverError(
                    "DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '58030', MESSAGE = '\(unescaped: message)'; END $$", on: connection)
                #expect(error.sqlState == .ioError, "\(message)")
                #expect(error.isRemoteNodeFailure && error.isTransient, "\(message)")
            }
            let other = try await serverError("DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'XX000', MESSAGE = 'cache lookup failed for type 1'; END $$", on: connection)
            #expect(!other.isRemoteNodeFailure)
            #expect(!other.isTransient)
            // A local disk's I/O error is not a node of the cluster.
            let disk = try await serverError("DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '58030', MESSAGE = 'could not read block 7 in file \"base/1/2\"'; END $$", on: connection)
            #expect(!disk.isRemoteNodeFailure)
            #expect(!disk.isTransient)
        }
    }

    @Test func uniqueViolationNamesTheConstraintButHidesTheValue() async throws {
        try await TestDatabase.withConnection { connection in
            let table = TestDatabase.uniqueName("pgt_unique")
            try await connection.execute(script: "CREATE TEMP TABLE \(table) (email text CONSTRAINT \(table)_email_key UNIQUE)")
            let secret = "alice-\(UUID().uuidString)@example.com"
            try await connection.query("INSERT INTO \(unescaped: table) VALUES (\(secret))")
            let error = try await serverError("INSERT INTO \(unescaped: table) VALUES (\(secret))", on: connection)
            #expect(error.kind == .server)
            #expect(error.sqlState == .uniqueViolation)
            #expect(error.constraint == "\(table)_email_key")
            #expect(error.table == table)
            #expect(error.detail?.contains(secret) == true)
            #expect(!error.description.contains(secret))
            #expect(!"\(error)".contains(secret))
            #expect(error.debugDescription.contains(secret))
            #expect(error.description.contains("23505"))
        }
    }

    @Test func badPortFailsQuicklyWithoutLeakingThePassword() async throws {
        let password = "hunter2-\(UUID().uuidString.prefix(8))"
        let port = LocalServer.freePort()  // nothing listens there
        let configuration = try ConnectionConfiguration(url: "postgresql://someone:\(password)@127.0.0.1:\(port)/nowhere")
        #expect(configuration["password"] == password)
        #expect(!configuration.description.contains(password))
        #expect(configuration.description.contains("password=***"))
        let start = ContinuousClock.now
        let error = await thrownError { _ = try await Connection.connect(configuration: configuration) }
        let elapsed = secondsSince(start)
        let postgresError = try #require(error as? PostgresError)
        #expect(postgresError.kind == .connectionFailed)
        #expect(postgresError.isConnectionLoss)
        // Refused, not timed out: libpq says which (on a busy core the refusal itself can take
        // seconds to be seen, so the message, not the time, is the evidence).
        #expect(postgresError.description.contains("Connection refused"), "\(postgresError)")
        #expect(!postgresError.description.contains("timeout"), "\(postgresError)")
        #expect(elapsed < 60, "took \(elapsed) s")
        #expect(!postgresError.description.contains(password))
        #expect(!postgresError.debugDescription.contains(password))
        #expect(!postgresError.message.contains(password))
    }

    @Test func descriptionRedactsEverySecretKeyword() throws {
        let configuration = try ConnectionConfiguration(
            url: "postgresql://someone:pw-secret@127.0.0.1:5432/db?sslpassword=ssl-secret&application_name=visible"
        )
        #expect(configuration["sslpassword"] == "ssl-secret")
        #expect(!configuration.description.contains("pw-secret"))
        #expect(!configuration.description.contains("ssl-secret"))
        #expect(configuration.description.contains("application_name=visible"))
        let keyValue = try ConnectionConfiguration(url: "host=/tmp password='kv secret' dbname=app")
        #expect(keyValue["password"] == "kv secret")
        #expect(!keyValue.description.contains("kv secret"))
    }

    @Test func unknownDatabaseIsAConnectionFailure() async throws {
        var configuration = try TestDatabase.configuration()
        configuration["dbname"] = "pgt_no_such_database"
        configuration["password"] = "s3cret-never-shown"
        let error = await thrownError { _ = try await Connection.connect(configuration: configuration) }
        let postgresError = try #require(error as? PostgresError)
        #expect(postgresError.kind == .connectionFailed)
        #expect(!postgresError.debugDescription.contains("s3cret-never-shown"))
    }

    @Test(arguments: [
        "postgresql://user:pa%zzss-secret@localhost/db",
        "postgresql://user:pass-secret@localhost:notaport/db",
        "postgresql://user:pass-secret@localhost/db?nosuchoption=1",
        "postgresql://user:pass-secret@[::1/db",
        "host=localhost password=pass-secret nosuchkey=1",
        "host=localhost password='pass-secret",
        "postgresql://user@localhost/db?password=pass-secret&nosuchoption=1",
        "postgresql://user@localhost/db?sslpassword=pass-secret&nosuchoption=1",
    ])
    func unparsableURLsNeverEchoThePassword(url: String) async throws {
        let secretFragment = url.contains("%zz") ? "zzss-secret" : "pass-secret"
        let error = await thrownError {
            let configuration = try ConnectionConfiguration(url: url)
            _ = try await Connection.connect(configuration: configuration)
        }
        let postgresError = try #require(error as? PostgresError, "\(url) gave \(String(describing: error))")
        #expect(postgresError.kind == .connectionFailed)
        #expect(!postgresError.debugDescription.contains(secretFragment), "\(postgresError.debugDescription)")
    }
}
