import Logging
import NIOConcurrencyHelpers
import Postgres

/// Where an account's own statements go: on a Citus cluster, straight to the worker node that
/// holds the account's shards, where they run locally, without the coordinator (docs/CITUS.md,
/// "Scale-out: the plan", step 3); anywhere else, the one pool.
///
/// The map is Citus's own (`pg_dist_shard`, `pg_dist_placement`, `pg_dist_node` for
/// `account_states`, whose group every per-account table shares), read from the coordinator by
/// ``refresh()``: each shard's range of `hashtext(account_id)`, and the node that holds it. An
/// account goes to the node whose range holds ``PostgresHash/text(_:)`` of its id, through a
/// pool of that node's own, opened with the coordinator's configuration (user, password,
/// database, TLS, options) and the node's address as Citus knows it.
///
/// A stale map is never wrong, only slower: every node of a Citus 11+ cluster routes a
/// statement on to the shard's node, as the coordinator does. The router carries statements
/// that commit on their own (a sync's device and reports, the account snapshot) and, once every
/// account's advisory lock is taken on its node (``routesTransactions``, sql/0046), the
/// transactions of one account alone (usage writes, holds) and of one claim queue bucket (the
/// workers' batches, once the queue is distributed by bucket: sql/0047, ``queuesOnNodes``; a
/// bucket is routed as its anchor value, which is in its accounts' shard). Everything that spans
/// an account's shard and something else (bindings, the sweeper) stays on the coordinator.
public final class AccountRouter: Sendable {
    /// The coordinator's pool (the only one on a single PostgreSQL, or before the first map).
    public let coordinator: ConnectionPool
    private let nodePoolSize: Int
    private let logger: Logger
    private let topology = DatabaseTopology()
    private let state = NIOLockedValueBox(State())

    /// A worker node, by the address Citus reaches it at.
    struct Node: Hashable, Sendable, CustomStringConvertible {
        var host: String
        var port: Int
        var description: String { "\(host):\(port)" }
    }

    /// A shard's range of hash values, and its node (`nil`: the coordinator holds it).
    struct ShardRange: Sendable, Equatable {
        var lowest: Int32
        var highest: Int32
        var node: Node?
    }

    private struct State {
        /// Sorted by `lowest`, disjoint.
        var ranges: [ShardRange] = []
        /// Whether transactions that may create an account's row can go to its node: the
        /// accounts' advisory locks are taken on their nodes (sql/0046, `work_anchors`
        /// distributed and filled by `subsync distribute`).
        var transactions = false
        /// Whether the claim queue is distributed by bucket (sql/0047, `subsync distribute`):
        /// a sync then queues its account on the account's node.
        var queue = false
        /// Whether due deliveries are kept by bucket with the accounts (sql/0048, `subsync
        /// distribute`): the delivery loops then claim one bucket at a time on its node.
        var deliveries = false
        /// Whether a refresh has read the map (and the anchors and queue) once.
        var read = false
        var pools: [Node: ConnectionPool] = [:]
        var closed = false
    }

    /// - Parameter nodePoolSize: connections of each worker node's pool (`serve` gives each the
    ///   size of its coordinator pool).
    public init(coordinator: ConnectionPool, nodePoolSize: Int, logger: Logger) {
        self.coordinator = coordinator
        self.nodePoolSize = max(1, nodePoolSize)
        self.logger = logger
    }

    /// The pool for `accountID`'s own statements: its node's, else the coordinator's.
    public func pool(for accountID: String) -> ConnectionPool {
        let hash = PostgresHash.text(accountID)
        return state.withLockedValue { state in
            guard let node = Self.range(containing: hash, in: state.ranges)?.node, let pool = state.pools[node] else { return coordinator }
            return pool
        }
    }

    /// The shard of `accountID` as the map knows it (the lowest hash value of its range), or `nil`
    /// before a map is read or on a single PostgreSQL: accounts with the same shard are on one
    /// node, and a statement that names only them runs on that shard alone.
    public func shard(of accountID: String) -> Int32? {
        let hash = PostgresHash.text(accountID)
        return state.withLockedValue { Self.range(containing: hash, in: $0.ranges)?.lowest }
    }

    /// `accountIDs` grouped by shard (``shard(of:)``), each group in the order of its first
    /// account, the groups in the order of their first accounts; accounts the map does not place
    /// form one group of their own.
    public func byShard(_ accountIDs: [String]) -> [[String]] {
        var groups: [[String]] = []
        var index: [Int32?: Int] = [:]
        for account in accountIDs {
            let shard = shard(of: account)
            if let position = index[shard] {
                groups[position].append(account)
            } else {
                index[shard] = groups.count
                groups.append([account])
            }
        }
        return groups
    }

    /// Runs `body` on a connection for `accountID`'s own statements: its node's, else the
    /// coordinator's. A node's pool retired by a new map between the lookup and the lease sends
    /// `body` to the coordinator instead, which routes it on.
    public func withConnection<T>(for accountID: String, _ body: (Connection) async throws -> T) async throws -> T {
        let pool = pool(for: accountID)
        guard pool !== coordinator else { return try await coordinator.withConnection(body) }
        var leased = false
        do {
            return try await pool.withConnection { connection in
                leased = true
                return try await body(connection)
            }
        } catch let error as PostgresError where error.kind == .closed && !leased {
            return try await coordinator.withConnection(body)
        }
    }

    /// Whether an account's transactions (usage writes, holds) may go to its node: only once
    /// every creator of an account's row takes its advisory lock on that node (sql/0046), which
    /// `subsync distribute` completes. Until then they stay on the coordinator.
    public var routesTransactions: Bool {
        state.withLockedValue { $0.transactions }
    }

    /// Reads the map unless a refresh has already: for the workers' first batches, which
    /// would otherwise go through the coordinator until ``ShardMapRefresher``'s first read.
    public func refreshUnlessRead() async throws {
        guard !state.withLockedValue({ $0.read || $0.closed }) else { return }
        try await refresh()
    }

    /// Whether a sync queues its account on the account's node: the claim queue is distributed
    /// by bucket with the accounts (sql/0047) and their locks are taken there.
    public var queuesOnNodes: Bool {
        state.withLockedValue { $0.queue }
    }

    /// Whether the delivery loops claim one bucket of due deliveries at a time, on its node, and
    /// the transactions on the accounts' nodes that write deliveries note their accounts as due
    /// in their buckets (sql/0048, after `subsync distribute`).
    public var deliveriesOnNodes: Bool {
        state.withLockedValue { $0.deliveries }
    }

    /// The worker nodes routed to now, for logs and tests.
    var nodes: [String] {
        state.withLockedValue { $0.pools.keys.map(\.description).sorted() }
    }

    /// The range of `ranges` (sorted, disjoint) that holds `hash`.
    static func range(containing hash: Int32, in ranges: [ShardRange]) -> ShardRange? {
        var low = 0
        var high = ranges.count - 1
        while low <= high {
            let middle = (low + high) / 2
            if hash < ranges[middle].lowest {
                high = middle - 1
            } else if hash > ranges[middle].highest {
                low = middle + 1
            } else {
                return ranges[middle]
            }
        }
        return nil
    }

    /// Reads the shard map from the coordinator; opens a pool for each node new to it and closes
    /// those of nodes that hold no shard any more. Returns the number of worker nodes routed to,
    /// `nil` on a single PostgreSQL (where nothing is read but whether Citus is there).
    @discardableResult
    public func refresh() async throws -> Int? {
        guard try await topology.isCitus(coordinator) else { return nil }
        let rows = try await coordinator.preparedQuery(
            """
            SELECT s.shardminvalue::integer, s.shardmaxvalue::integer, n.groupid = 0, n.nodename, n.nodeport
            FROM pg_dist_shard s
            JOIN pg_dist_placement p ON p.shardid = s.shardid
            JOIN pg_dist_node n ON n.groupid = p.groupid AND n.noderole = 'primary' AND n.isactive
                 AND n.hasmetadata AND n.metadatasynced
            WHERE s.logicalrelid = 'account_states'::regclass
            ORDER BY 1, 3 DESC, 4, 5
            """
        )
        var ranges: [ShardRange] = []
        for row in rows {
            let lowest = try row.decode(Int32.self, at: 0)
            // One placement a shard (a replicated shard has several: the first is as good).
            if ranges.last?.lowest == lowest { continue }
            let onCoordinator = try row.decode(Bool.self, at: 2)
            let node = onCoordinator ? nil : Node(host: try row.decode(String.self, at: 3), port: try row.decode(Int.self, at: 4))
            ranges.append(ShardRange(lowest: lowest, highest: try row.decode(Int32.self, at: 1), node: node))
        }
        let count = await install(ranges)
        // Apart from the map, so that a worker node down (the count reads every shard) or a
        // schema before sql/0046 leaves the syncs routed: then the last answer stands, or none.
        if let placement = try? await anchorsAndQueue() {
            state.withLockedValue { state in
                guard !state.closed else { return }
                state.transactions = placement.anchors
                state.queue = placement.anchors && placement.queue
                state.deliveries = placement.anchors && placement.queue && placement.deliveries
                Outbox.keepsDueByBucket.withLockedValue { [deliveries = state.deliveries] in $0 = deliveries }
            }
        }
        state.withLockedValue { $0.read = true }
        return count
    }

    /// Whether `work_anchors` is distributed and holds a row for each shard of the accounts
    /// (and `''`): `subsync distribute` writes them with the bucket function (sql/0046); and
    /// whether the claim queue is distributed (sql/0047).
    private func anchorsAndQueue() async throws -> (anchors: Bool, queue: Bool, deliveries: Bool) {
        let rows = try await coordinator.preparedQuery(
            """
            SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass('work_anchors'))
                   AND (SELECT count(*) FROM work_anchors) > (SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'account_states'::regclass),
                   EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass('account_work')),
                   EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass('delivery_work'))
            """
        )
        return (try rows[0].decode(Bool.self, at: 0), try rows[0].decode(Bool.self, at: 1), try rows[0].decode(Bool.self, at: 2))
    }

    /// Makes `ranges` the map: the pools of its nodes opened, those of other nodes closed.
    /// Returns the number of worker nodes.
    func install(_ ranges: [ShardRange]) async -> Int {
        let nodes = Set(ranges.compactMap(\.node))
        let (retired, opened): ([ConnectionPool], [Node]) = state.withLockedValue { state in
            guard !state.closed else { return ([], []) }
            var opened: [Node] = []
            for node in nodes where state.pools[node] == nil {
                var configuration = coordinator.configuration
                configuration.connection["host"] = node.host
                configuration.connection["hostaddr"] = nil
                configuration.connection["port"] = String(node.port)
                // A node demoted to a standby (a failover the map has not seen yet) refuses
                // the connection, a transient failure, rather than taking writes it must refuse.
                configuration.connection["target_session_attrs"] = "read-write"
                configuration.maximumConnections = nodePoolSize
                state.pools[node] = ConnectionPool(configuration: configuration, logger: logger)
                opened.append(node)
            }
            let gone = state.pools.keys.filter { !nodes.contains($0) }
            state.ranges = ranges.sorted { $0.lowest < $1.lowest }
            return (gone.compactMap { state.pools.removeValue(forKey: $0) }, opened)
        }
        if !opened.isEmpty {
            logger.info("routing accounts to their worker nodes", metadata: ["nodes": "\(opened.map(\.description).sorted())"])
        }
        // A request that leased from a retired pool finishes; its connection closes on return.
        for pool in retired { await pool.close() }
        return nodes.count
    }

    /// Closes every node's pool; every account goes to the coordinator from now on.
    public func close() async {
        let pools = state.withLockedValue { state in
            state.closed = true
            state.ranges = []
            state.transactions = false
            state.deliveries = false
            defer { state.pools = [:] }
            return Array(state.pools.values)
        }
        for pool in pools { await pool.close() }
    }
}
