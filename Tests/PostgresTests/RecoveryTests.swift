import Foundation
@testable import Postgres
import TestSupport
import Testing

/// The pool survives the server going away: restarts, stops, and killed backends.
@Suite struct RecoveryTests {
    static func backendPIDs(_ pool: ConnectionPool, concurrently count: Int) async throws -> Set<Int32> {
        try await withThrowingTaskGroup(of: Int32.self) { group in
            for _ in 0..<count {
                group.addTask {
                    try await pool.query("SELECT pg_backend_pid(), pg_sleep(0.2)::text")[0].decode(Int32.self, at: 0)
                }
            }
            var pids: Set<Int32> = []
            for try await pid in group { pids.insert(pid) }
            return pids
        }
    }

    static func isConnectionError(_ error: (any Error)?) -> Bool {
        guard let error = error as? PostgresError else { return false }
        return error.kind == .connectionLost || error.kind == .connectionFailed
    }

    @Test(.timeLimit(.minutes(15)))
    func poolRecoversFromRestartAndStop() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pgt-server-\(UUID().uuidString)")
        let server = try LocalServer(dataDirectory: directory, port: LocalServer.freePort())
        defer {
            try? server.stop(mode: "immediate")
            try? FileManager.default.removeItem(at: directory)
        }
        try await runBlocking { try server.start() }
        let pool = ConnectionPool(
            configuration: .init(connection: server.connectionConfiguration, maximumConnections: 3, leaseTimeout: .seconds(10))
        )
        let listener = NotificationListener(configuration: server.connectionConfiguration, channels: ["pgt_wakeup"])
        _ = try await listener.wait(timeout: .milliseconds(10))
        let before = try await Self.backendPIDs(pool, concurrently: 3)
        #expect(before.count == 3)
        #expect(await pool.statistics.idle == 3)

        // Restart: the idle connections are dead now.
        try await runBlocking { try server.restart() }
        var failures: [any Error] = []
        var after: Set<Int32> = []
        var outcomes: [Bool] = []
        for _ in 0..<8 {
            do {
                after.insert(try await pool.query("SELECT pg_backend_pid()")[0].decode(Int32.self, at: 0))
                outcomes.append(true)
            } catch {
                failures.append(error)
                outcomes.append(false)
            }
        }
        #expect(failures.count <= 3, "failures after restart: \(failures)")
        #expect(failures.allSatisfy(Self.isConnectionError), "\(failures)")
        #expect(outcomes.suffix(5).allSatisfy { $0 }, "the last queries succeed: \(outcomes)")
        #expect(after.isDisjoint(with: before), "a connection from before the restart was reused")
        #expect(await pool.statistics.open <= 3)

        // The listener notices the loss, reconnects, LISTENs again and receives new notifications.
        var listenerFailures = 0
        var received: [PostgresNotification] = []
        let listenStart = ContinuousClock.now
        while received.isEmpty, secondsSince(listenStart) < 300 {
            do {
                _ = try await listener.wait(timeout: .milliseconds(10))
                try await pool.withConnection { try await $0.notify(channel: "pgt_wakeup", payload: "after restart") }
                received += try await listener.wait(timeout: .seconds(2))
            } catch {
                listenerFailures += 1
                #expect(Self.isConnectionError(error), "\(error)")
            }
        }
        #expect(received.map(\.payload) == ["after restart"])
        #expect(listenerFailures <= 1)
        await listener.close()

        // A statement in flight when the server stops fails promptly; so do new ones.
        let inFlight = Task { await thrownError { try await pool.query("SELECT pg_sleep(30)") } }
        let running = try await waitUntil {
            let rows = try await pool.query("SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)' AND state = 'active'")
            return try rows[0].decode(Int.self, at: 0) == 1
        }
        #expect(running, "the statement never started")
        try await runBlocking { try server.stop() }
        let inFlightError = await inFlight.value
        #expect(Self.isConnectionError(inFlightError), "in-flight statement got \(String(describing: inFlightError))")
        let start = ContinuousClock.now
        for _ in 0..<3 {
            let error = await thrownError { try await pool.query("SELECT 1") }
            #expect(Self.isConnectionError(error), "got \(String(describing: error))")
            // Refused, not timed out: libpq says which (as in ErrorTests).
            #expect(!String(describing: error).contains("timeout"), "got \(String(describing: error))")
        }
        // Refused at once, not after the connect timeout (5 s) of each; on a busy machine the
        // refusals themselves can take seconds, so the message above is the sharper evidence.
        #expect(secondsSince(start) < 60, "failing while the server is down took \(secondsSince(start)) s")

        try await runBlocking { try server.start() }
        let pids = try await Self.backendPIDs(pool, concurrently: 3)
        #expect(pids.isDisjoint(with: before) && pids.isDisjoint(with: after))
        for index in 0..<5 {
            #expect(try await pool.query("SELECT \(index)::int")[0].decode(Int.self, at: 0) == index)
        }
        #expect(await pool.statistics.open <= 3)
        await pool.close()
    }

    @Test func terminatedBackendIsReplaced() async throws {
        let pool = ConnectionPool(
            configuration: .init(connection: try TestDatabase.configuration(), maximumConnections: 1, leaseTimeout: .seconds(10))
        )
        let victim = try await pool.query("SELECT pg_backend_pid()")[0].decode(Int32.self, at: 0)
        try await TestDatabase.withConnection { admin in
            let terminated = try await admin.query("SELECT pg_terminate_backend(\(victim))")
            #expect(try terminated[0].decode(Bool.self, at: 0))
            // Wait until the backend process has gone.
            let gone = try await waitUntil {
                try await admin.query("SELECT count(*) FROM pg_stat_activity WHERE pid = \(victim)")[0].decode(Int.self, at: 0) == 0
            }
            #expect(gone)
        }
        let replacement = try await pool.query("SELECT pg_backend_pid()")[0].decode(Int32.self, at: 0)
        #expect(replacement != victim)
        await pool.close()
    }

    @Test func terminatedConnectionReportsConnectionLost() async throws {
        try await TestDatabase.withConnection { connection in
            try await TestDatabase.withConnection { admin in
                try await admin.query("SELECT pg_terminate_backend(\(connection.backendPID))")
            }
            var error: (any Error)?
            await waitUntil {
                error = await thrownError { try await connection.query("SELECT 1") }
                return error != nil
            }
            let postgresError = try #require(error as? PostgresError)
            #expect(postgresError.isConnectionLoss, "\(postgresError)")
            #expect(connection.isAlive() == false)
        }
    }
}
