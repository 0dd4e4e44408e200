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
            configuration: .init(connection: try configuration(applicationName: name), maximumConnections: 4, leaseTimeout: .seconds(600))
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

    /// Holds `count` connections of `pool` until the gate opens.
    private func hold(_ count: Int, of pool: ConnectionPool) async -> (gate: Gate, done: Task<Void, any Error>) {
        let gate = Gate()
        let (held, signal) = AsyncStream<Void>.makeStream()
        let holders = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<count {
                    group.addTask {
                        try await pool.withConnection { _ in
                            signal.yield()
                            await gate.wait()
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        var seen = 0
        for await _ in held {
            seen += 1
            if seen == count { break }
        }
        return (gate, holders)
    }

    @Test func leaseTimesOutWhenEveryConnectionIsHeld() async throws {
        // The lease timeout runs on a clock the test moves: the waiter times out exactly when
        // its timeout has passed, never earlier, however busy the machine is.
        let clock = ManualClock()
        let pool = ConnectionPool(
            configuration: .init(connection: try TestDatabase.configuration(), maximumConnections: 2, leaseTimeout: .milliseconds(300)),
            clock: clock.continuous
        )
        let (gate, holders) = await hold(2, of: pool)
        let waiter = Task { await thrownError { try await pool.query("SELECT 1") } }
        #expect(await waitUntil { await pool.statistics.waiting == 1 })
        #expect(await clock.waitForSleepers(atLeast: 1), "the waiter's timer never started")
        clock.advance(by: .milliseconds(299))
        #expect(await pool.statistics.waiting == 1, "timed out before its timeout")
        #expect(clock.sleeperCount == 1)
        clock.advance(by: .milliseconds(1))
        let error = await waiter.value
        #expect((error as? PostgresError)?.kind == .poolTimeout, "got \(String(describing: error))")
        #expect(await pool.statistics.waiting == 0)
        await gate.open()
        try await holders.value
        let after = try await pool.query("SELECT 8")
        #expect(try after[0].decode(Int.self, at: 0) == 8)
        #expect(await pool.statistics.open <= 2)
        await pool.close()
    }

    @Test func waitersAreServedInArrivalOrderAndACancelledOneBlocksNobody() async throws {
        // Timeouts on a clock that never moves: only the order of service is under test.
        let clock = ManualClock()
        let pool = ConnectionPool(
            configuration: .init(connection: try TestDatabase.configuration(), maximumConnections: 1, leaseTimeout: .seconds(1)),
            clock: clock.continuous
        )
        let (gate, holder) = await hold(1, of: pool)
        let served = Served()
        var waiters: [Task<Bool, Never>] = []
        for index in 0..<8 {
            waiters.append(Task {
                do {
                    try await pool.withConnection { connection in
                        await served.append(index)
                        _ = try await connection.query("SELECT \(index)::int")
                    }
                    return true
                } catch {
                    return false
                }
            })
            // Each waiter joins the queue before the next one arrives.
            #expect(await waitUntil { await pool.statistics.waiting == index + 1 })
        }
        waiters[3].cancel()
        #expect(await waitUntil { await pool.statistics.waiting == 7 }, "a cancelled waiter stays in the queue")
        await gate.open()
        try await holder.value
        var outcomes: [Bool] = []
        for waiter in waiters { outcomes.append(await waiter.value) }
        #expect(outcomes == [true, true, true, false, true, true, true, true])
        #expect(await served.order == [0, 1, 2, 4, 5, 6, 7], "the connection went to the oldest waiter each time")
        #expect(await waitUntil { clock.sleeperCount == 0 }, "a served waiter's timer kept running")
        let statistics = await pool.statistics
        #expect(statistics.waiting == 0 && statistics.open == 1)
        await pool.close()
    }

    @Test func waitersAreServedBeforeTheirTimeout() async throws {
        // 20 callers on one connection, each holding it briefly: all succeed, none times out.
        // The timeout (600 s) is far beyond the expected second, even on a busy core, so only a
        // lost wake-up fails it.
        let pool = ConnectionPool(
            configuration: .init(connection: try TestDatabase.configuration(), maximumConnections: 1, leaseTimeout: .seconds(600))
        )
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
        #expect(await pool.statistics.open == 1)
        #expect(await pool.statistics.waiting == 0)
        await pool.close()
    }

    @Test func prewarmOpensConnectionsAheadOfNeedAndLeasesTakeThem() async throws {
        let name = TestDatabase.uniqueName("pgt_prewarm")
        let pool = ConnectionPool(
            configuration: .init(connection: try configuration(applicationName: name), maximumConnections: 6, leaseTimeout: .seconds(600))
        )
        let observer = try await Connection.connect(configuration: try TestDatabase.configuration())
        func serverSidePIDs() async throws -> Set<Int32> {
            Set(try await observer.query("SELECT pid FROM pg_stat_activity WHERE application_name = \(name)").map { try $0.decode(Int32.self, at: 0) })
        }
        await pool.prewarm(4)
        var statistics = await pool.statistics
        #expect(statistics.open == 4 && statistics.idle == 4 && statistics.waiting == 0)
        let prewarmed = try await serverSidePIDs()
        #expect(prewarmed.count == 4)

        // Four callers at once take the four open connections: no backend is started for them.
        let used = try await withThrowingTaskGroup(of: Int32.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    try await pool.withConnection { connection in
                        try await connection.query("SELECT pg_backend_pid(), pg_sleep(0.05)::text")[0].decode(Int32.self, at: 0)
                    }
                }
            }
            return try await group.reduce(into: Set<Int32>()) { $0.insert($1) }
        }
        #expect(used.isSubset(of: prewarmed), "used \(used), prewarmed \(prewarmed)")
        #expect(await pool.statistics.open == 4)
        #expect(try await serverSidePIDs() == prewarmed)

        // Never beyond the pool's bound, and what is open already counts.
        await pool.prewarm(20)
        statistics = await pool.statistics
        #expect(statistics.open == 6 && statistics.idle == 6)
        #expect(try await serverSidePIDs().count == 6)
        await pool.prewarm(2)
        #expect(await pool.statistics.open == 6)
        await pool.close()
        await observer.close()
    }

    @Test func prewarmAgainstNoServerLeavesTheFailureToTheCaller() async throws {
        // Port 1: nothing listens there, so every connection is refused at once.
        var configuration = try TestDatabase.configuration()
        configuration["host"] = "127.0.0.1"
        configuration["port"] = "1"
        let pool = ConnectionPool(configuration: .init(connection: configuration, maximumConnections: 3, leaseTimeout: .seconds(5)))
        await pool.prewarm(3)
        let statistics = await pool.statistics
        #expect(statistics.open == 0 && statistics.idle == 0)
        let error = await thrownError { try await pool.query("SELECT 1") }
        #expect((error as? PostgresError)?.kind == .connectionFailed, "\(String(describing: error))")
        #expect(await pool.statistics.open == 0)
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

/// The order in which waiters got the connection.
private actor Served {
    var order: [Int] = []
    func append(_ index: Int) { order.append(index) }
}

/// Lets tasks wait until the test opens it.
private actor Gate {
    private var isOpen = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func open() {
        isOpen = true
        for continuation in waiting { continuation.resume() }
        waiting.removeAll()
    }

    func wait() async {
        if isOpen { return }
        await withCheckedContinuation { waiting.append($0) }
    }
}
