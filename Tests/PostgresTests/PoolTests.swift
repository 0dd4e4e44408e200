import Foundation
import Postgres
import TestSupport
import Testing

/// The pool bounds connections, queues callers fairly and times out instead of hanging.
@Suite struct PoolTests {
    func configuration(applicationName: String) throws -> ConnectionConfiguration {
        var configuration = try TestDatabase.configuration()
        configuration["application_name"] = applicationName
        return configuration
    }

    @Test func moreCallersThanConnections() async throws {
        let name = TestDatabase.uniqueName("pgt_pool")
        let pool = ConnectionPool(
            configuration: .init(connection: try configuration(applicationName: name), maximumConnections: 4, leaseTimeout: .seconds(30))
        )
        struct Sample: Sendable {
            var pid: Int32
            var index: Int
            var echoed: Int
            var serverSide: Int
            var open: Int
        }
        let results = try await withThrowingTaskGroup(of: Sample.self) { group in
            for index in 0..<50 {
                group.addTask {
                    try await pool.withConnection { connection in
                        let rows = try await connection.query(
                            "SELECT pg_backend_pid(), \(index)::int, (SELECT count(*) FROM pg_stat_activity WHERE application_name = \(name))::int, pg_sleep(0.01)::text"
                        )
                        let open = await pool.statistics.open
                        return Sample(
                            pid: try rows[0].decode(Int32.self, at: 0), index: index, echoed: try rows[0].decode(Int.self, at: 1),
                            serverSide: try rows[0].decode(Int.self, at: 2), open: open
                        )
                    }
                }
            }
            var all: [Sample] = []
            for try await result in group { all.append(result) }
            return all
        }
        #expect(results.count == 50)
        #expect(results.allSatisfy { $0.index == $0.echoed })
        #expect(Set(results.map(\.pid)).count <= 4, "backends used: \(Set(results.map(\.pid)))")
        #expect(results.map(\.serverSide).max() ?? 0 <= 4, "server-side connections: \(results.map(\.serverSide).max() ?? 0)")
        #expect(results.map(\.open).max() ?? 0 <= 4)
        let statistics = await pool.statistics
        #expect(statistics.open <= 4 && statistics.waiting == 0 && statistics.idle == statistics.open)
        await pool.close()
        #expect(await pool.statistics.open == 0)
        let closed = await thrownError { try await pool.query("SELECT 1") }
        #expect((closed as? PostgresError)?.kind == .closed)
    }

    @Test func leaseTimesOutWhenEveryConnectionIsHeld() async throws {
        let pool = ConnectionPool(
            configuration: .init(connection: try TestDatabase.configuration(), maximumConnections: 2, leaseTimeout: .milliseconds(300))
        )
        // Two holders keep both connections for well over the lease timeout.
        let (firstHeld, firstSignal) = AsyncStream<Void>.makeStream()
        let (secondHeld, secondSignal) = AsyncStream<Void>.makeStream()
        let holders = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for signal in [firstSignal, secondSignal] {
                    group.addTask {
                        try await pool.withConnection { connection in
                            signal.yield()
                            try await connection.query("SELECT pg_sleep(1.5)")
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        for await _ in firstHeld { break }
        for await _ in secondHeld { break }
        let start = ContinuousClock.now
        let error = await thrownError { try await pool.query("SELECT 1") }
        let elapsed = secondsSince(start)
        #expect((error as? PostgresError)?.kind == .poolTimeout, "got \(String(describing: error))")
        #expect(elapsed >= 0.29 && elapsed < 1.4, "timed out after \(elapsed) s")
        #expect(await pool.statistics.waiting == 0)
        try await holders.value
        let after = try await pool.query("SELECT 8")
        #expect(try after[0].decode(Int.self, at: 0) == 8)
        #expect(await pool.statistics.open <= 2)
        await pool.close()
    }

    @Test func waitersAreServedBeforeTheirTimeout() async throws {
        let pool = ConnectionPool(
            configuration: .init(connection: try TestDatabase.configuration(), maximumConnections: 1, leaseTimeout: .seconds(5))
        )
        // 20 callers on one connection, each holding it briefly: all succeed, none times out.
        try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<20 {
                group.addTask {
                    try await pool.query("SELECT \(index)::int, pg_sleep(0.02)::text")[0].decode(Int.self, at: 0)
                }
            }
            var seen: Set<Int> = []
            for try await value in group { seen.insert(value) }
            #expect(seen == Set(0..<20))
        }
        // After the last lease timer would have fired, nothing is resumed twice and the pool works.
        try await Task.sleep(for: .milliseconds(100))
        #expect(await pool.statistics.open == 1)
        await pool.close()
    }

    @Test func connectionReturnedInsideATransactionIsNotReused() async throws {
        let pool = ConnectionPool(
            configuration: .init(connection: try TestDatabase.configuration(), maximumConnections: 1, leaseTimeout: .seconds(5))
        )
        let leaked = try await pool.withConnection { connection in
            try await connection.execute(script: "BEGIN")
            return connection.backendPID
        }
        let next = try await pool.withConnection { connection in
            let rows = try await connection.query("SELECT pg_backend_pid(), now() = statement_timestamp()")
            return try rows[0].decode(Int32.self, at: 0)
        }
        #expect(next != leaked)
        await pool.close()
    }
}
