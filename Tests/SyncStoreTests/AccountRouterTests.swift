import Foundation
import Logging
import Postgres
import SyncCore
@testable import SyncStore
import Testing

/// The router that sends an account's sync statements to the Citus node holding it
/// (docs/CITUS.md, "How the pipeline runs on Citus"). On one PostgreSQL it routes nothing; with a
/// shard map it picks the node whose hash range holds the account, by the server's own hash.
/// `scripts/citus` (citus.d/commits.py) checks it against a real cluster.
@Suite struct AccountRouterTests {
    /// Account ids whose `hashtext` is below zero and at or above it.
    static func accounts(negative: Bool, count: Int) -> [String] {
        (0..<10_000).lazy.map { "routed-\($0)" }.filter { (PostgresHash.text($0) < 0) == negative }.prefix(count).map { $0 }
    }

    @Test func onOnePostgreSQLEveryAccountGoesToTheOnePool() async throws {
        try await withMigratedDatabase { pool, _ in
            let router = AccountRouter(coordinator: pool, nodePoolSize: 3, logger: Logger(label: "test"))
            let nodes = try await router.refresh()
            #expect(nodes == nil)
            for account in ["a", "b", Self.accounts(negative: true, count: 1)[0]] {
                #expect(router.pool(for: account) === pool)
            }
            #expect(router.nodes.isEmpty)
        }
    }

    @Test func anAccountGoesToTheNodeWhoseRangeHoldsItsHash() async throws {
        try await withMigratedDatabase { pool, connection in
            let router = AccountRouter(coordinator: pool, nodePoolSize: 3, logger: Logger(label: "test"))
            // The test database stands in for a worker node (reached at its own address, by a
            // pool of the router's), and an address nothing listens on for another; the
            // coordinator holds the middle range.
            let own = pool.configuration.connection
            let real = AccountRouter.Node(host: try #require(own["host"]), port: Int(own["port"] ?? "5432") ?? 5432)
            let elsewhere = AccountRouter.Node(host: "192.0.2.1", port: 6543)
            let count = await router.install([
                .init(lowest: 0, highest: Int32.max, node: real),
                .init(lowest: Int32.min, highest: -1_000_000_001, node: elsewhere),
                .init(lowest: -1_000_000_000, highest: -1, node: nil),
            ])
            #expect(count == 2)
            #expect(router.nodes == [elsewhere.description, real.description].sorted())
            let negative = Self.accounts(negative: true, count: 200)
            let far = try #require(negative.first { PostgresHash.text($0) <= -1_000_000_001 })
            let onCoordinator = try #require(negative.first { PostgresHash.text($0) > -1_000_000_001 })
            #expect(router.pool(for: onCoordinator) === pool)
            let farPool = router.pool(for: far)
            #expect(farPool !== pool)
            #expect(farPool.configuration.connection["host"] == "192.0.2.1")
            #expect(farPool.configuration.connection["port"] == "6543")
            #expect(farPool.configuration.connection["hostaddr"] == nil)
            #expect(farPool.configuration.connection["dbname"] == own["dbname"])
            #expect(farPool.configuration.connection["user"] == own["user"])
            #expect(farPool.configuration.maximumConnections == 3)
            // Through the node's own pool, a sync stores what it stores through the coordinator.
            let near = Self.accounts(negative: false, count: 1)[0]
            let nearPool = router.pool(for: near)
            #expect(nearPool !== pool)
            #expect(router.pool(for: near) === nearPool)
            let inbox = ReportInbox(pool: pool, router: router)
            let reports = ReportInboxTests.variedReports(count: 3, seed: 63)
            let routed = try await nodeSubmit(inbox: inbox, pool: nearPool, account: near, reports: reports)
            #expect(routed.accepted.count == Set(reports.map(\.reportID)).count)
            #expect(try await inbox.pendingCount(accountID: near, reportIDs: reports.map(\.reportID)) == routed.accepted.count)
            let stored = try await connection.query("SELECT count(*) FROM reports WHERE account_id = \(near)")[0].decode(Int.self, at: 0)
            #expect(stored == routed.accepted.count)
            // A node that holds no shard any more is dropped, and its accounts go to the coordinator.
            let remaining = await router.install([.init(lowest: Int32.min, highest: Int32.max, node: real)])
            #expect(remaining == 1)
            #expect(router.pool(for: far) === nearPool)
            #expect(router.nodes == [real.description])
            await router.close()
            #expect(router.pool(for: near) === pool)
            #expect(router.nodes.isEmpty)
        }
    }

    /// A sync's device and reports through `pool` (the node's), as ``ReportInbox`` sends them on Citus.
    private func nodeSubmit(inbox: ReportInbox, pool: ConnectionPool, account: String, reports: [Report]) async throws -> ReportInbox.Submission {
        try await pool.withConnection {
            try await inbox.submitRouted(accountID: account, device: DeviceInfo(id: "phone"), reports: reports, seenAt: nil, on: $0)
        }
    }

    /// A claim's and a record's accounts go to their nodes a shard at a time: grouped by the
    /// range that holds them, in the order of their first account, and those no range holds
    /// (before a map, or a gap) as a group of their own.
    @Test func accountsAreGroupedByTheirShard() async throws {
        try await withMigratedDatabase { pool, _ in
            let router = AccountRouter(coordinator: pool, nodePoolSize: 1, logger: Logger(label: "test"))
            let negative = Self.accounts(negative: true, count: 6)
            let positive = Self.accounts(negative: false, count: 6)
            let mixed = [positive[0], negative[0], positive[1], negative[1], positive[2], negative[2]]
            // No map: one group, in order.
            #expect(router.byShard(mixed) == [mixed])
            #expect(router.shard(of: positive[0]) == nil)
            _ = await router.install([
                .init(lowest: Int32.min, highest: -1, node: nil),
                .init(lowest: 0, highest: Int32.max, node: nil),
            ])
            #expect(router.byShard(mixed) == [[positive[0], positive[1], positive[2]], [negative[0], negative[1], negative[2]]])
            #expect(router.shard(of: negative[3]) == Int32.min)
            #expect(router.shard(of: positive[3]) == 0)
            // A gap in the map (the negative half unplaced) groups what it holds by itself.
            _ = await router.install([.init(lowest: 0, highest: Int32.max, node: nil)])
            #expect(router.byShard([negative[4], positive[4], negative[5], positive[5]]) == [[negative[4], negative[5]], [positive[4], positive[5]]])
            #expect(router.byShard([]) == [])
            await router.close()
        }
    }

    @Test func theRangeLookupFindsEveryHashAndOnlyInARange() {
        let ranges: [AccountRouter.ShardRange] = [
            .init(lowest: Int32.min, highest: -10, node: nil),
            .init(lowest: -9, highest: 0, node: .init(host: "a", port: 1)),
            .init(lowest: 5, highest: Int32.max, node: .init(host: "b", port: 2)),
        ]
        #expect(AccountRouter.range(containing: Int32.min, in: ranges) == ranges[0])
        #expect(AccountRouter.range(containing: -10, in: ranges) == ranges[0])
        #expect(AccountRouter.range(containing: -9, in: ranges) == ranges[1])
        #expect(AccountRouter.range(containing: 0, in: ranges) == ranges[1])
        #expect(AccountRouter.range(containing: 3, in: ranges) == nil)
        #expect(AccountRouter.range(containing: 5, in: ranges) == ranges[2])
        #expect(AccountRouter.range(containing: Int32.max, in: ranges) == ranges[2])
        #expect(AccountRouter.range(containing: 1, in: []) == nil)
    }
}
