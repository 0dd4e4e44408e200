import Foundation
import NIOConcurrencyHelpers
import Postgres

/// The webhook outbox as the delivery workers and operators see it.
public struct DeliveryStore: Sendable {
    let pool: ConnectionPool
    /// Opens the endpoints' sealed signing secrets.
    let sealer: SecretSealer
    /// One PostgreSQL or Citus: the claim has a form for each.
    let topology = DatabaseTopology()
    /// On Citus, once the accounts' nodes are known (``AccountRouter/routesTransactions``),
    /// claims, records and releases go to the nodes that hold their accounts, a transaction per
    /// shard (docs/CITUS.md, "How the pipeline runs on Citus").
    let router: AccountRouter?
    /// The buckets a claim takes in turn once due deliveries are kept by bucket (sql/0048).
    private let buckets = WorkBuckets()
    /// Where the hold's look for due accounts without a row goes on from (``noteDueAccounts``).
    private let sweptTo = NIOLockedValueBox("")

    public init(pool: ConnectionPool, sealer: SecretSealer = .none, router: AccountRouter? = nil) {
        self.pool = pool
        self.sealer = sealer
        self.router = router
    }

    /// The router, when this process sends the deliveries' statements to their accounts' nodes.
    private var nodes: AccountRouter? {
        guard let router, router.routesTransactions else { return nil }
        return router
    }

    /// At most this many deliveries behind one head are claimed with it. A sender must also stop
    /// a stream before its lease runs out (see `DeliveryWorker`); this bounds the rows a claim
    /// reads for a stream with a long backlog.
    public static let maximumFollowersPerStream = 100

    /// A delivery claimed for an attempt, with everything needed to send it.
    public struct Claimed: Sendable {
        public var accountID: String
        public var deliveryID: Int64
        public var endpointID: UUID
        public var eventID: UUID
        public var eventSequence: Int64
        public var eventType: String
        public var occurredAt: Date
        /// The event's JSON, as stored.
        public var payload: String
        public var url: String
        /// Attempts made before this one, in the delivery's whole life: this one is number
        /// `attempts + 1` in its history (`delivery_attempts`).
        public var attempts: Int
        /// How many of those were made before an operator last made the delivery due again
        /// (`retry`): the retry schedule counts from there, so this one is number
        /// `attempts - attemptsBeforeRetry + 1` of its schedule.
        public var attemptsBeforeRetry: Int
        /// The secrets that sign this attempt: the current one, and the previous during a rotation.
        public var secrets: [WebhookSecret]
        /// When the endpoint's deliveries started failing, if they are failing.
        public var failingSince: Date?
        /// The lease this claim took (the same for every delivery of one claim): `record` and
        /// `release` change only rows that still hold it, so a sender that outlived its lease
        /// cannot undo what the sender that claimed the stream after it is doing.
        public var leasedUntil: Date
        /// Whether the claim took this delivery's stream whole and this is its last delivery:
        /// nothing of the stream was pending behind it when it was claimed (no limit of the
        /// claim cut the stream short). An attempt at it that succeeds, dies or finds the
        /// endpoint gone leaves nothing behind it for `record` to look for, but what
        /// `holdBlocked` set to wait for this claim's lease meanwhile.
        public var endsStream: Bool = false
    }

    /// Claims due deliveries of enabled endpoints, keeping each account's events to each endpoint
    /// in sequence order (a *stream*, keyed by account and endpoint).
    ///
    /// A delivery is a stream's *head* when no earlier delivery of the stream is pending
    /// (waiting, retrying, or leased to a sender). Up to `limit` due heads are claimed, then up to
    /// `limit` pending deliveries that follow them in their streams, so a stream with a backlog
    /// drains in one round. Everything claimed is leased: its `leased_until` is set `lease`
    /// ahead, and no stream with a leased delivery is claimed, so no other sender takes it, nor
    /// anything after it in its stream, until this sender records (or a sender that died lets
    /// the lease run out). The lease is its own column: an operator's `retry`, which rewrites
    /// `next_attempt_at`, cannot end it, and `cancel` refuses a leased delivery (a claim asks
    /// the stream's pending deliveries whether it is out). The result is ordered by stream and sequence;
    /// senders must send a stream's deliveries one after another and stop at its first failure
    /// (`record` then holds the rest back until that one is retried).
    ///
    /// With `partition` (index, count), only accounts whose hash falls in that partition are
    /// claimed, so a process's delivery loops do not contend for the same rows.
    public func claimDue(limit: Int, lease: TimeInterval, partition: (index: Int, count: Int) = (0, 1), now: Date = Date()) async throws -> [Claimed] {
        try await claim(limit: limit, lease: lease, partition: partition, now: now).deliveries
    }

    /// What a claim took: the deliveries to send, and those it held back because their endpoint's
    /// secret cannot be opened (``SecretHold``).
    public struct Claim: Sendable {
        public var deliveries: [Claimed]
        public var held: [SecretHold]
        /// The claim knows more is due now that it did not take (on Citus, another bucket's
        /// deliveries, sql/0048): its loop goes on at once, though it took less than a batch.
        public var more = false
    }

    /// Deliveries of one endpoint that a claim held back for about ``secretHold`` seconds instead of
    /// sending: its stored secret (or the previous one, while that still signs) cannot be opened
    /// with `SUBSYNC_SECRET_KEYS` (the key that sealed it was removed before `subsync endpoints
    /// reseal`). Only that endpoint waits; the claim's other deliveries go out. No attempt is
    /// counted, so nothing dies of it.
    public struct SecretHold: Sendable, Equatable {
        public var endpointID: UUID
        public var deliveries: Int
        /// Why the secret does not open (names the key id, never a secret).
        public var error: String
        /// When they are due again (``heldUntil(claimedAt:leasedUntil:)``).
        public var until: Date
    }

    /// How long a delivery whose endpoint's secret cannot be opened waits after its claim before
    /// it is claimed (and tried) again: a minute, so that deliveries resume within about a minute
    /// of the key's return (see ``heldUntil(claimedAt:leasedUntil:)``).
    public static let secretHold: TimeInterval = 60

    /// When the deliveries a claim at `now` held are due again: ``secretHold`` after it, unless
    /// that is within a second of the claim's lease's end, then a second past that end. Never on
    /// it: `record` lets go of what waits exactly for a lease, so they would be claimed, and held,
    /// again at once. Before the lease's end is fine: the hold ends their lease, and nothing of
    /// their streams is left in the claim.
    public static func heldUntil(claimedAt now: Date, leasedUntil: Date) -> Date {
        let until = now.addingTimeInterval(secretHold)
        return abs(until.timeIntervalSince(leasedUntil)) < 1 ? leasedUntil.addingTimeInterval(1) : until
    }

    /// ``claimDue(limit:lease:partition:now:)``, with what it held back.
    public func claim(limit: Int, lease: TimeInterval, partition: (index: Int, count: Int) = (0, 1), now: Date = Date()) async throws -> Claim {
        // Heads are limited by `limit`; followers by `limit` in all and by
        // `maximumFollowersPerStream` per head, so a claim reads at most limit × (1 + that).
        // One value for the whole claim: what `record` and `release` compare the rows with.
        let leasedUntil = now.addingTimeInterval(lease)
        let rows: QueryResult
        if try await topology.isCitus(pool) {
            // The map before a loop's first claim, which would otherwise go through the
            // coordinator until the refresher's first read. Without it, the coordinator claims.
            try? await router?.refreshUnlessRead()
            if let nodes, nodes.deliveriesOnNodes {
                // Only deliveries of enabled endpoints are noted due (sql/0048): no need to ask.
                let (rows, more) = try await claimByBucket(nodes, limit: limit, partition: partition, now: now, leasedUntil: leasedUntil)
                var claim = try await claimed(from: rows, limit: limit, leasedUntil: leasedUntil, now: now)
                claim.more = more
                return claim
            }
            guard try await anyEndpointEnabled() else { return Claim(deliveries: [], held: []) }
            if let nodes {
                let rows = try await claimOnNodes(nodes, limit: limit, partition: partition, now: now, leasedUntil: leasedUntil)
                return try await claimed(from: rows, limit: limit, leasedUntil: leasedUntil, now: now)
            }
            // `subsync_claim_due_deliveries` (sql/0014, 0035) finds the heads without locks and leases each
            // stream with statements that name its account: on Citus, one shard each, where the
            // multi-shard `FOR UPDATE` below is refused. On one PostgreSQL it is slower than the
            // statement below (docs/CITUS.md, "How the pipeline runs on Citus"), so that one stays.
            rows = try await pool.preparedQuery(
                """
                SELECT * FROM subsync_claim_due_deliveries(
                    \(limit), \(min(limit, Self.maximumFollowersPerStream)), \(now), \(leasedUntil),
                    \(partition.index), \(partition.count))
                ORDER BY account_id, endpoint_id, event_sequence, delivery_id
                """
            )
            return try await claimed(from: rows, limit: limit, leasedUntil: leasedUntil, now: now)
        }
        rows = try await pool.preparedQuery(
            Self.claimQuery(heads: limit, followers: limit, partition: partition, now: now, leasedUntil: leasedUntil, shard: nil))
        return try await claimed(from: rows, limit: limit, leasedUntil: leasedUntil, now: now)
    }

    /// A claim on Citus with the accounts' nodes known: the due deliveries' accounts, found with
    /// one read of every shard without locks, then each shard's share claimed on its node by one
    /// PostgreSQL's claim statement naming those accounts (``claimQuery``), which Citus sends
    /// whole to the shard: in the order of their first due delivery, until `limit` heads and
    /// `limit` followers are claimed. Each share commits on its node alone. A share whose node
    /// does not answer is left for the next claim, unless nothing else was claimed. Rows come
    /// grouped by account and stream, in sequence order.
    private func claimOnNodes(
        _ router: AccountRouter, limit: Int, partition: (index: Int, count: Int), now: Date, leasedUntil: Date
    ) async throws -> [Row] {
        let due = try await pool.preparedQuery(
            """
            SELECT d.account_id FROM deliveries d
            JOIN webhook_endpoints w ON w.endpoint_id = d.endpoint_id AND w.enabled
            WHERE d.status = 'pending' AND d.next_attempt_at <= \(now)
              AND (d.leased_until IS NULL OR d.leased_until <= \(now))
              AND mod(hashtext(d.account_id)::bigint + 2147483648, \(partition.count)) = \(partition.index)
            ORDER BY d.next_attempt_at
            LIMIT \(limit)
            """
        )
        var seen = Set<String>()
        let accounts = try due.map { try $0.decode(String.self, at: 0) }.filter { seen.insert($0).inserted }
        var rows: [Row] = []
        var heads = 0
        var followers = 0
        var unreachable: (any Error)?
        for shard in router.byShard(accounts) where heads < limit {
            let claimed: QueryResult
            do {
                claimed = try await router.withConnection(for: shard[0]) { connection in
                    try await connection.preparedQuery(
                        Self.claimQuery(
                            heads: limit - heads, followers: limit - followers, partition: partition, now: now, leasedUntil: leasedUntil,
                            shard: shard))
                }
            } catch let error as PostgresError where error.isTransient {
                unreachable = error
                continue
            }
            var streams = 0
            var last: (String, UUID)?
            for row in claimed {
                let stream = (try row.decode(String.self, at: 0), try row.decode(UUID.self, at: 2))
                if last.map({ $0 != stream }) ?? true { streams += 1 }
                last = stream
                rows.append(row)
            }
            heads += streams
            followers += claimed.count - streams
        }
        if rows.isEmpty, let unreachable { throw unreachable }
        return rows
    }

    /// A claim on Citus with due deliveries kept by bucket (sql/0048): `partition` is a share of
    /// the buckets here (the loops of a process divide them; processes meet in `SKIP LOCKED`).
    /// Its buckets with accounts due (one read of their shards of `delivery_work` on the
    /// coordinator: an idle loop's poll costs that read, not a transaction on every bucket),
    /// taken in turn, each on the node that holds it, until one yields deliveries (a bucket that
    /// fails is passed over). In one transaction there: the bucket's due accounts locked
    /// (`SKIP LOCKED`, a batch at most), their deliveries claimed by one PostgreSQL's claim
    /// statement (``claimQuery``),
    /// and the accounts' due times set again (``noteDue``: a claimed account is due when its
    /// lease ends, should its sender die). Every statement names one shard. `more`: other buckets
    /// had accounts due, or the claim took a whole batch.
    private func claimByBucket(
        _ router: AccountRouter, limit: Int, partition: (index: Int, count: Int), now: Date, leasedUntil: Date
    ) async throws -> (rows: [Row], more: Bool) {
        guard let all = try await buckets.current(pool: pool, topology: topology, now: now) else { return ([], false) }
        // A process's loops share the buckets out: whole buckets make whole batches.
        let mine = all.enumerated().filter { $0.offset % max(1, partition.count) == partition.index }.map(\.element)
        guard !mine.isEmpty else { return ([], false) }
        // Which are due: one read; when it fails (a node down), every bucket is tried.
        let due: Set<String>
        do {
            due = Set(
                try await pool.preparedQuery(
                    "SELECT DISTINCT bucket FROM delivery_work WHERE bucket = ANY(\(mine)::text[]) AND due_at <= \(now)"
                ).map { try $0.decode(String.self, at: 0) })
        } catch let error as PostgresError where error.isTransient {
            due = Set(mine)
        }
        guard !due.isEmpty else { return ([], false) }
        var failure: (any Error)?
        for _ in mine.indices {
            let bucket = mine[buckets.take(of: mine.count)]
            guard due.contains(bucket) else { continue }
            do {
                let rows = try await router.withConnection(for: bucket) { connection in
                    try await connection.withTransaction { connection -> [Row] in
                        let accounts = try await connection.preparedQuery(
                            """
                            SELECT account_id FROM delivery_work
                            WHERE bucket = \(bucket) AND due_at <= \(now)
                            ORDER BY due_at, account_id
                            LIMIT \(limit)
                            FOR UPDATE SKIP LOCKED
                            """
                        ).map { try $0.decode(String.self, at: 0) }
                        guard !accounts.isEmpty else { return [] }
                        let rows = Array(
                            try await connection.preparedQuery(
                                Self.claimQuery(
                                    heads: limit, followers: limit, partition: (0, 1), now: now, leasedUntil: leasedUntil, shard: accounts)))
                        try await Self.noteDue(of: accounts, bucket: bucket, on: connection)
                        return rows
                    }
                }
                if !rows.isEmpty { return (rows, due.count > 1 || rows.count >= limit) }
            } catch {
                // A node down, or a bucket that no longer matches its accounts' shard (a shard
                // split before `distribute` ran again: Citus refuses its statements). The other
                // buckets go on; the error is the loop's when nothing was claimed.
                failure = error
            }
        }
        if let failure { throw failure }
        return ([], false)
    }

    /// Sets each of `accounts`' row in `delivery_work` (all in `bucket`) to the account's next
    /// due time: the earliest at which one of its streams (its pending deliveries to an enabled
    /// endpoint) can be claimed, its first delivery's due time or, when a delivery of the stream
    /// is leased, that lease's end; and deletes the rows of accounts with none. A stream's
    /// followers due behind a head that waits for its retry do not make it due (they would make
    /// every claim of the bucket read the account again until the hold moves them). The caller
    /// holds the rows (a claim's `FOR UPDATE`, a record's lock), so a transaction that writes a
    /// delivery of one of them meanwhile writes its row after this one commits (its `ON
    /// CONFLICT` takes the earlier time). The deliveries of a disabled endpoint wait for the hold
    /// to note them again.
    static func noteDue(of accounts: [String], bucket: String, on connection: Connection) async throws {
        try await connection.preparedQuery(
            """
            DELETE FROM delivery_work x
            WHERE x.bucket = \(bucket) AND x.account_id = ANY(\(accounts)::text[])
              AND NOT EXISTS (
                  SELECT 1 FROM deliveries d JOIN webhook_endpoints w ON w.endpoint_id = d.endpoint_id AND w.enabled
                  WHERE d.account_id = x.account_id AND d.account_id = ANY(\(accounts)::text[]) AND d.status = 'pending')
            """
        )
        try await connection.preparedQuery(
            """
            UPDATE delivery_work x SET due_at = n.due
            FROM (
                SELECT s.account_id, min(s.due) AS due FROM (
                    SELECT d.account_id,
                           greatest((array_agg(d.next_attempt_at ORDER BY d.event_sequence, d.delivery_id))[1], max(d.leased_until)) AS due
                    FROM deliveries d JOIN webhook_endpoints w ON w.endpoint_id = d.endpoint_id AND w.enabled
                    WHERE d.account_id = ANY(\(accounts)::text[]) AND d.status = 'pending'
                    GROUP BY d.account_id, d.endpoint_id) AS s
                GROUP BY s.account_id) AS n
            WHERE x.bucket = \(bucket) AND x.account_id = n.account_id AND x.account_id = ANY(\(accounts)::text[])
              AND x.due_at IS DISTINCT FROM n.due
            """
        )
    }

    /// Notes as due, in `delivery_work`, accounts of this partition (by account hash) with
    /// deliveries due now and not leased: 1,000 a call, in account order from where the last call
    /// stopped, round and round (a read of every shard), so that every such account is reached
    /// however many are due. The safety net for what a process without the map wrote (an
    /// operator command, an older release) and for any row lost. The hold calls it on Citus,
    /// every 10 s a loop.
    private func noteDueAccounts(_ router: AccountRouter, partition: (index: Int, count: Int), now: Date) async throws {
        let after = sweptTo.withLockedValue { $0 }
        let due = try await pool.preparedQuery(
            """
            SELECT DISTINCT d.account_id FROM deliveries d
            JOIN webhook_endpoints w ON w.endpoint_id = d.endpoint_id AND w.enabled
            WHERE d.status = 'pending' AND d.next_attempt_at <= \(now)
              AND (d.leased_until IS NULL OR d.leased_until <= \(now))
              AND mod(hashtext(d.account_id)::bigint + 2147483648, \(partition.count)) = \(partition.index)
              AND d.account_id > \(after)
            ORDER BY d.account_id
            LIMIT 1000
            """
        ).map { try $0.decode(String.self, at: 0) }
        sweptTo.withLockedValue { $0 = due.count < 1000 ? "" : due.last ?? "" }
        for shard in router.byShard(due) {
            try await router.withConnection(for: shard[0]) { try await Self.markDue(shard, at: [Date](repeating: now, count: shard.count), on: $0) }
        }
    }

    /// Notes `accounts` (sorted) due in their buckets, each at its time in `times`, unless due
    /// sooner. In account order: a claim or a record that holds some of these rows takes them in
    /// that order too. The one writer of rows for accounts named by the caller (`Outbox`, the
    /// hold, releases).
    static func markDue(_ accounts: [String], at times: [Date], on connection: Connection) async throws {
        try await connection.preparedQuery(
            """
            INSERT INTO delivery_work (bucket, account_id, due_at)
            SELECT subsync_work_bucket(a), a, d FROM unnest(\(accounts)::text[], \(times)::timestamptz[]) AS v(a, d)
            ORDER BY a
            ON CONFLICT (bucket, account_id) DO UPDATE SET due_at = EXCLUDED.due_at WHERE delivery_work.due_at > EXCLUDED.due_at
            """
        )
    }

    /// One PostgreSQL's claim (see ``claim(limit:lease:partition:now:)``). With `shard`, the
    /// accounts it may take, all of one shard, named beside every table of the accounts, so that
    /// Citus sends the whole statement to that shard, where it runs as it does on one PostgreSQL.
    private static func claimQuery(
        heads: Int, followers: Int, partition: (index: Int, count: Int), now: Date, leasedUntil: Date, shard: [String]?
    ) -> PostgresQuery {
        """
        WITH heads AS (
            SELECT d.account_id, d.delivery_id, d.endpoint_id, d.event_sequence FROM deliveries d
            JOIN webhook_endpoints w ON w.endpoint_id = d.endpoint_id AND w.enabled
            WHERE d.status = 'pending' AND d.next_attempt_at <= \(now) \(shard, condition: "AND d.account_id = ANY(?::text[])")
              -- On the row itself, so that a claim racing another one rechecks it on the
              -- version the other committed (FOR UPDATE re-evaluates the row's own conditions,
              -- not subqueries over other rows).
              AND (d.leased_until IS NULL OR d.leased_until <= \(now))
              AND mod(hashtext(d.account_id)::bigint + 2147483648, \(partition.count)) = \(partition.index)
              -- The stream's first pending delivery, and not while a sender has any of the
              -- stream's pending deliveries (one that an operator retried meanwhile, or one
              -- that a replay, a retry or a new event put beside the leased ones): the lease
              -- ends when that sender records, or expires. One probe of the stream's pending
              -- set asks both (a probe each costs more, docs/PERFORMANCE.md "In the code").
              -- A leased delivery stays pending until its sender records it (an operator
              -- cannot cancel it meanwhile, see `cancel`), so the pending set answers, through
              -- deliveries_pending_by_stream: no index holds leased_until, so that a lease is
              -- written in place (sql/0026). OFFSET 0 keeps this a probe per candidate: as an
              -- anti-join, with stale statistics, the planner once scanned the whole pending
              -- set per candidate, and once took 1.1 s a claim with 500 streams in flight.
              AND NOT EXISTS (
                  SELECT 1 FROM deliveries other
                  WHERE other.endpoint_id = d.endpoint_id AND other.account_id = d.account_id AND other.status = 'pending'
                    \(shard, condition: "AND other.account_id = ANY(?::text[])")
                    AND (other.leased_until > \(now)
                         OR (other.event_sequence, other.delivery_id) < (d.event_sequence, d.delivery_id))
                  OFFSET 0)
            ORDER BY d.next_attempt_at
            LIMIT \(heads)
            FOR UPDATE OF d SKIP LOCKED
        ), followers AS (
            -- What waits behind a claimed head goes out right after it. Their own
            -- next_attempt_at only held them back (see `record`); nobody else holds them.
            SELECT f.account_id, f.delivery_id, f.endpoint_id, f.event_sequence FROM heads h
            CROSS JOIN LATERAL (
                SELECT behind.account_id, behind.delivery_id, behind.endpoint_id, behind.event_sequence FROM deliveries behind
                WHERE behind.account_id = h.account_id AND behind.endpoint_id = h.endpoint_id AND behind.status = 'pending'
                  \(shard, condition: "AND behind.account_id = ANY(?::text[])")
                  AND (behind.event_sequence, behind.delivery_id) > (h.event_sequence, h.delivery_id)
                ORDER BY behind.event_sequence, behind.delivery_id
                LIMIT \(min(followers, Self.maximumFollowersPerStream))
            ) f
            ORDER BY f.account_id, f.endpoint_id, f.event_sequence, f.delivery_id
            LIMIT \(followers)
        ), claimed AS (
            SELECT account_id, delivery_id, 'pending'::text AS expected FROM heads
            UNION ALL
            SELECT account_id, delivery_id, 'pending'::text FROM followers
        ), leased AS (
            -- By key, one probe per claimed row: the status is compared with a column of
            -- the claimed rows, so the planner cannot start from the deliveries (see `record`;
            -- with no condition of their own left, the one other plan is a hash join over all
            -- of them, which it takes only for a table smaller than the claim's probes cost).
            -- `claimed` must stay a UNION: from one SELECT the constant would be pulled in.
            UPDATE deliveries d SET leased_until = \(leasedUntil)
            FROM claimed c WHERE d.account_id = c.account_id AND d.delivery_id = c.delivery_id AND d.status = c.expected
              \(shard, condition: "AND d.account_id = ANY(?::text[])")
            RETURNING d.account_id, d.delivery_id, d.endpoint_id, d.event_id, d.event_sequence, d.attempts, d.attempts_before_retry
        )
        SELECT l.account_id, l.delivery_id, l.endpoint_id, l.event_id, l.event_sequence, l.attempts,
               e.type, e.occurred_at, e.payload::text, w.url, w.secret,
               CASE WHEN w.previous_secret_expires_at > \(now) THEN w.previous_secret END,
               w.failing_since, l.attempts_before_retry
        FROM leased l
        JOIN events e ON e.account_id = l.account_id AND e.sequence = l.event_sequence \(shard, condition: "AND e.account_id = ANY(?::text[])")
        JOIN webhook_endpoints w ON w.endpoint_id = l.endpoint_id
        ORDER BY l.account_id, l.endpoint_id, l.event_sequence, l.delivery_id
        """
    }

    /// The claimed deliveries of either claim's rows (ordered by stream and sequence), with
    /// each stream's last marked when the claim took the stream whole. A claim's rows share a
    /// few endpoints, so each stored secret is opened (decrypted, when sealed, and decoded)
    /// once per claim. Deliveries whose secrets do not open are held (``SecretHold``): all of
    /// a stream's, since a stream is one endpoint's.
    private func claimed(from rows: some Sequence<Row>, limit: Int, leasedUntil: Date, now: Date) async throws -> Claim {
        var opened: [String: Result<WebhookSecret, any Error>] = [:]
        var unreadable: [UUID: String] = [:]
        func open(_ stored: String) -> WebhookSecret? {
            let result = opened[stored] ?? Result { try sealer.open(stored) }
            opened[stored] = result
            return try? result.get()
        }
        func error(of stored: [String]) -> String {
            // SecretSealer's errors name the key id, never the secret.
            for text in stored { if case .failure(let error) = opened[text] { return "\(error)" } }
            return "a webhook secret does not open"
        }
        var all: [Claimed] = []
        for row in rows {
            let stored = [try row.decode(String.self, at: 10)] + [try row.decode(String?.self, at: 11)].compactMap { $0 }
            let secrets = stored.compactMap(open)
            var delivery = try claimed(from: row, leasedUntil: leasedUntil, secrets: secrets)
            if secrets.count < stored.count {
                unreadable[delivery.endpointID] = error(of: stored)
                delivery.secrets = []
            }
            all.append(delivery)
        }
        // Stream ends are marked over everything the claim took, held or not (the limit counted both).
        Self.markStreamEnds(&all, limit: limit)
        guard !unreadable.isEmpty else { return Claim(deliveries: all, held: []) }
        let held = all.filter { unreadable[$0.endpointID] != nil }
        let until = Self.heldUntil(claimedAt: now, leasedUntil: leasedUntil)
        try await pool.preparedQuery(
            """
            UPDATE deliveries d SET leased_until = NULL, next_attempt_at = \(until)
            FROM unnest(\(held.map(\.accountID))::text[], \(held.map(\.deliveryID))::bigint[]) AS v(account_id, delivery_id)
            WHERE d.account_id = v.account_id AND d.delivery_id = v.delivery_id AND d.leased_until = \(leasedUntil)
            """
        )
        let counts = Dictionary(grouping: held, by: \.endpointID).mapValues(\.count)
        return Claim(
            deliveries: all.filter { unreadable[$0.endpointID] == nil },
            held: counts.keys.sorted { $0.uuidString < $1.uuidString }.map {
                SecretHold(endpointID: $0, deliveries: counts[$0] ?? 0, error: unreadable[$0] ?? "", until: until)
            })
    }

    /// Marks the last delivery of each stream that a claim of `limit` took whole
    /// (``Claimed/endsStream``). Both claims take one head a stream and at most
    /// `min(limit, maximumFollowersPerStream)` deliveries behind it, `limit` in all: a stream
    /// with that many behind its head may have had more, and once `limit` followers were
    /// taken any stream may have been cut short, so neither is marked.
    static func markStreamEnds(_ deliveries: inout [Claimed], limit: Int) {
        var streamStart = 0
        var streams = 0
        var ends: [Int] = []
        for index in deliveries.indices {
            let next = index + 1
            guard next == deliveries.count || deliveries[next].accountID != deliveries[index].accountID
                || deliveries[next].endpointID != deliveries[index].endpointID
            else { continue }
            streams += 1
            if index - streamStart < min(limit, maximumFollowersPerStream) { ends.append(index) }
            streamStart = next
        }
        guard deliveries.count - streams < limit else { return }
        for index in ends { deliveries[index].endsStream = true }
    }

    /// A claimed delivery from a row of either claim: the columns in the order both select them.
    private func claimed(from row: Row, leasedUntil: Date, secrets: [WebhookSecret]) throws -> Claimed {
        Claimed(
            accountID: try row.decode(String.self, at: 0),
            deliveryID: try row.decode(Int64.self, at: 1),
            endpointID: try row.decode(UUID.self, at: 2),
            eventID: try row.decode(UUID.self, at: 3),
            eventSequence: try row.decode(Int64.self, at: 4),
            eventType: try row.decode(String.self, at: 6),
            occurredAt: try row.decode(Date.self, at: 7),
            payload: try row.decode(String.self, at: 8),
            url: try row.decode(String.self, at: 9),
            attempts: try row.decode(Int.self, at: 5),
            attemptsBeforeRetry: try row.decode(Int.self, at: 13),
            secrets: secrets,
            failingSince: try row.decode(Date?.self, at: 12),
            leasedUntil: leasedUntil
        )
    }

    /// What one attempt came to.
    public struct AttemptResult: Sendable {
        public enum Outcome: String, Sendable {
            /// 2xx: done.
            case succeeded
            /// Try again at `nextAttemptAt`.
            case retry
            /// No attempts left.
            case dead
            /// The endpoint answered 410 Gone: it is disabled and this delivery cancelled.
            case gone
        }

        public var accountID: String
        public var deliveryID: Int64
        public var endpointID: UUID
        public var eventSequence: Int64
        public var attempt: Int
        public var outcome: Outcome
        public var nextAttemptAt: Date
        public var statusCode: Int?
        public var latencyMilliseconds: Int
        /// Why it failed (at most 1,000 bytes, control characters replaced).
        public var error: String? {
            didSet { error = Self.storable(error, limit: 1000) }
        }
        /// The first 4 KiB of the response body, as text: a receiver's bytes are whatever it
        /// sent (binary, compressed, a NUL), so invalid UTF-8 and control characters other
        /// than tab and newlines are replaced with U+FFFD. PostgreSQL text cannot hold a NUL,
        /// and one such reply used to fail the record of its whole batch.
        public var responseExcerpt: String? {
            didSet { responseExcerpt = Self.storable(responseExcerpt, limit: 4096) }
        }
        public var attemptedAt: Date
        /// The attempt was at the last delivery of a stream its claim took whole
        /// (``Claimed/endsStream``).
        public var endsStream: Bool

        /// `text` as it can be stored and shown: at most `limit` bytes of UTF-8, no control
        /// characters but tab, line feed and carriage return.
        static func storable(_ text: String?, limit: Int) -> String? {
            guard let text else { return nil }
            var scalars = String.UnicodeScalarView()
            var bytes = 0
            for scalar in text.unicodeScalars {
                let kept: Unicode.Scalar =
                    scalar.properties.generalCategory == .control && !["\t", "\n", "\r"].contains(scalar) ? "\u{FFFD}" : scalar
                bytes += kept.utf8.count
                guard bytes <= limit else { break }
                scalars.append(kept)
            }
            return String(scalars)
        }

        public init(
            accountID: String, deliveryID: Int64, endpointID: UUID, eventSequence: Int64, attempt: Int, outcome: Outcome, nextAttemptAt: Date,
            statusCode: Int?, latencyMilliseconds: Int, error: String?, responseExcerpt: String?, attemptedAt: Date,
            endsStream: Bool = false
        ) {
            self.accountID = accountID
            self.deliveryID = deliveryID
            self.endpointID = endpointID
            self.eventSequence = eventSequence
            self.attempt = attempt
            self.outcome = outcome
            self.nextAttemptAt = nextAttemptAt
            self.statusCode = statusCode
            self.latencyMilliseconds = latencyMilliseconds
            self.error = Self.storable(error, limit: 1000)
            self.responseExcerpt = Self.storable(responseExcerpt, limit: 4096)
            self.attemptedAt = attemptedAt
            self.endsStream = endsStream
        }
    }

    /// Records a batch of attempts in one transaction: the attempts log, the deliveries' new
    /// status, and the endpoints' health (a success clears `failing_since`; a failure sets it;
    /// 410, or failing for longer than `disableAfter`, disables the endpoint).
    ///
    /// After each stream's last attempt in `results`, what waits behind it (claimed with it but not
    /// sent, or held back by `holdBlocked`) becomes due when that delivery is retried, or now when it
    /// succeeded, died or was cancelled: nothing goes before it, and nothing stays held or leased
    /// after it. `results` must hold at most one failure per stream, its last attempt.
    ///
    /// - `lease` (the claim's ``Claimed/leasedUntil``): only deliveries that still hold it are
    ///   updated, so a sender that outlived its lease logs its attempts but leaves the deliveries and
    ///   the leases of the sender that claimed them since alone. Nil: no check.
    /// - `lettingGoOfStreams` false: the attempts only, for attempts of a round recorded one at a
    ///   time that are not their stream's last (what follows is still leased to the round, and
    ///   letting go of it would have it sent again).
    /// - `onlyNewAttempts`: an attempt already logged fails the whole call (a unique violation)
    ///   instead of being kept; the loops try this cheaper plain insert first and record attempt by
    ///   attempt when it fails (docs/PERFORMANCE.md, "In the code").
    public func record(
        _ results: [AttemptResult], lease: Date? = nil, disableAfter: TimeInterval, now: Date = Date(), lettingGoOfStreams: Bool = true,
        onlyNewAttempts: Bool = false
    ) async throws {
        guard !results.isEmpty else { return }
        let isCitus = try await topology.isCitus(pool)
        if isCitus, let nodes {
            // Each shard's attempts in a transaction on its node; the endpoints' health after, in a
            // transaction of its own (a reference table's write commits on every node). A stream is one
            // account's, so each stream's record is whole; a shard that fails leaves its
            // deliveries leased, to be sent again when the lease runs out.
            var seen = Set<String>()
            let accounts = results.map(\.accountID).filter { seen.insert($0).inserted }
            let notesDue = nodes.deliveriesOnNodes
            for shard in nodes.byShard(accounts.sorted()) {
                let mine = Set(shard)
                try await nodes.withConnection(for: shard[0]) { connection in
                    try await connection.withTransaction { connection in
                        // The accounts' due rows held first, in account order (as every writer of
                        // them takes them), then set to what this record leaves (sql/0048).
                        var bucket: String?
                        if notesDue {
                            bucket = try await connection.preparedQuery("SELECT subsync_work_bucket(\(shard[0]))")[0].decode(String.self, at: 0)
                            try await connection.preparedQuery(
                                """
                                SELECT 1 FROM delivery_work WHERE bucket = \(bucket) AND account_id = ANY(\(shard)::text[])
                                ORDER BY account_id FOR UPDATE
                                """)
                        }
                        try await recordAttempts(
                            results.filter { mine.contains($0.accountID) }, shard: shard, lease: lease, now: now, isCitus: true,
                            lettingGoOfStreams: lettingGoOfStreams, onlyNewAttempts: onlyNewAttempts, on: connection)
                        if let bucket { try await Self.noteDue(of: shard, bucket: bucket, on: connection) }
                    }
                }
            }
            // On a node too: the endpoints are a reference table, read where they are; a change
            // (rare) is written to every node from there as from the coordinator.
            try await nodes.withConnection(for: accounts[0]) { connection in
                try await connection.withTransaction { try await recordHealth(of: results, disableAfter: disableAfter, now: now, on: $0) }
            }
            return
        }
        try await pool.withTransaction { connection in
            try await recordAttempts(
                results, shard: nil, lease: lease, now: now, isCitus: isCitus, lettingGoOfStreams: lettingGoOfStreams,
                onlyNewAttempts: onlyNewAttempts, on: connection)
            try await recordHealth(of: results, disableAfter: disableAfter, now: now, on: connection)
        }
    }

    /// `record`'s attempts and deliveries, in `connection`'s transaction. `shard`: the accounts of
    /// `results`, all of one shard, named in every statement so that Citus runs it on that
    /// shard alone.
    private func recordAttempts(
        _ results: [AttemptResult], shard: [String]?, lease: Date?, now: Date, isCitus: Bool, lettingGoOfStreams: Bool,
        onlyNewAttempts: Bool, on connection: Connection
    ) async throws {
        let leases = [Date?](repeating: lease, count: results.count)
        if !isCitus {
            // Every statement below names a few hundred rows by key: nested loops over the keys, not a
            // hash of every pending delivery (docs/PERFORMANCE.md, "In the code").
            try await connection.execute(script: "SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off")
        }
        try await connection.preparedQuery(
            """
            INSERT INTO delivery_attempts (account_id, delivery_id, attempt, attempted_at, status_code, latency_ms, error, response_excerpt)
            SELECT * FROM unnest(
                \(results.map(\.accountID))::text[], \(results.map(\.deliveryID))::bigint[], \(results.map(\.attempt))::int[],
                \(results.map(\.attemptedAt))::timestamptz[], \(results.map(\.statusCode))::int[],
                \(results.map(\.latencyMilliseconds))::int[], \(results.map(\.error))::text[], \(results.map(\.responseExcerpt))::text[])
            \(unescaped: onlyNewAttempts ? "" : "ON CONFLICT DO NOTHING")
            """
        )
        let status: [String] = results.map {
            switch $0.outcome {
            case .succeeded: "succeeded"
            case .retry: "pending"
            case .dead: "dead"
            case .gone: "cancelled"
            }
        }
        // By key, one probe per result. The pending check and the claim's lease are compared with
        // columns of the results (`expected`, `lease`), not constants, so that statistics from before
        // a burst cannot make the planner start from the pending deliveries: as join conditions they
        // restrict nothing on their own (docs/PERFORMANCE.md, "In the code").
        let updated = try await connection.preparedQuery(
            """
            UPDATE deliveries d SET
                status = v.status, attempts = v.attempt, next_attempt_at = v.next_at,
                last_status_code = v.code, last_error = v.error, leased_until = NULL,
                completed_at = CASE WHEN v.status = 'pending' THEN NULL ELSE \(now)::timestamptz END -- (Citus: no now() in CASE)
            FROM unnest(
                \(results.map(\.accountID))::text[], \(results.map(\.deliveryID))::bigint[], \(status)::text[],
                \(results.map(\.attempt))::int[], \(results.map(\.nextAttemptAt))::timestamptz[],
                \(results.map(\.statusCode))::int[], \(results.map(\.error))::text[], \(leases)::timestamptz[],
                \([String](repeating: "pending", count: results.count))::text[]
            ) AS v(account_id, delivery_id, status, attempt, next_at, code, error, lease, expected)
            WHERE d.account_id = v.account_id AND d.delivery_id = v.delivery_id
              AND d.status = v.expected -- its endpoint was deleted meanwhile, or its lease ran out and it was cancelled
              AND (v.lease IS NULL OR d.leased_until = v.lease) \(shard, condition: "AND d.account_id = ANY(?::text[])")
            RETURNING d.account_id, d.delivery_id
            """
        )
        // What waits behind each stream's last attempt: held until a retry, or let go.
        var lasts = Self.lastAttempts(of: results)
        if !isCitus, let lease, lasts.contains(where: { $0.endsStream && $0.outcome != .retry }) {
            // A stream that ends here (its claim took it whole, and its last delivery succeeded, died or
            // found the endpoint gone) leaves nothing behind it but the new deliveries `holdBlocked` set
            // to wait until this claim's `lease` exactly: one probe of the due index lets all of those go,
            // for every stream of the round (docs/PERFORMANCE.md, "In the code"). First, so that the hold
            // below still wins for the streams that are retried. Another stream's delivery let go by
            // mistake (another claim's lease at the same microsecond) is only claimed sooner: a claim never
            // takes a stream out with a sender. Behind the streams that do not end here, the probe below
            // looks.
            try await connection.preparedQuery(
                """
                UPDATE deliveries SET next_attempt_at = \(now)
                WHERE status = 'pending' AND next_attempt_at = \(lease)
                """
            )
            lasts.removeAll { $0.endsStream && $0.outcome != .retry }
        }
        if !lettingGoOfStreams { lasts = [] }
        if lease != nil, !lasts.isEmpty {
            // A stream whose last attempt's delivery the status update left alone is not this
            // sender's any more (its lease ran out and another sender has the stream, or an
            // operator cancelled the delivery meanwhile): nothing behind it is held or let go
            // of here. The sender that has it does that, and a retry of this sender's must not
            // hold back what that sender lets go of.
            let mine = Set(try updated.map { DeliveryKey(accountID: try $0.decode(String.self, at: 0), deliveryID: try $0.decode(Int64.self, at: 1)) })
            lasts.removeAll { !mine.contains(DeliveryKey(accountID: $0.accountID, deliveryID: $0.deliveryID)) }
        }
        let holds = lasts.map { $0.outcome == .retry }
        let untils = lasts.map { $0.outcome == .retry ? $0.nextAttemptAt : now }
        let lastLeases = [Date?](repeating: lease, count: lasts.count)
        // Then the sender is done with these streams: their leases end. The deliveries sent
        // let go of theirs in the update above; what is still leased here was claimed behind
        // a failure and not sent (an operator's `retry` leaves the delivery pending, and the
        // update above records the attempt over it), so it follows the stream's last attempt,
        // where the hold looks too. A leased delivery is always pending here: an operator
        // cannot cancel it while it is out.
        if lasts.isEmpty {
            // Nothing behind these attempts to hold or let go of.
        } else if isCitus {
            try await connection.preparedQuery(
                """
                UPDATE deliveries f SET next_attempt_at = v.until
                FROM unnest(
                    \(lasts.map(\.accountID))::text[], \(lasts.map(\.endpointID))::uuid[],
                    \(lasts.map(\.eventSequence))::bigint[], \(lasts.map(\.deliveryID))::bigint[],
                    \(holds)::boolean[], \(untils)::timestamptz[]
                ) AS v(account_id, endpoint_id, event_sequence, delivery_id, hold, until)
                WHERE f.endpoint_id = v.endpoint_id AND f.account_id = v.account_id AND f.status = 'pending'
                  AND (f.event_sequence, f.delivery_id) > (v.event_sequence, v.delivery_id)
                  AND (v.hold OR f.next_attempt_at > v.until) \(shard, condition: "AND f.account_id = ANY(?::text[])")
                """
            )
            try await connection.preparedQuery(
                """
                UPDATE deliveries f SET leased_until = NULL
                FROM unnest(
                    \(lasts.map(\.accountID))::text[], \(lasts.map(\.endpointID))::uuid[], \(lastLeases)::timestamptz[]
                ) AS v(account_id, endpoint_id, lease)
                WHERE f.account_id = v.account_id AND f.endpoint_id = v.endpoint_id AND f.status = 'pending'
                  AND f.leased_until IS NOT NULL AND (v.lease IS NULL OR f.leased_until = v.lease)
                  \(shard, condition: "AND f.account_id = ANY(?::text[])")
                """
            )
        } else {
            // Both in one statement: one probe of each stream's pending set after its last attempt,
            // through deliveries_pending_by_stream (the LATERAL ... OFFSET 0 keeps it per stream), then
            // rows updated by primary key, with no other condition on `f` to invite a scan of it
            // (docs/PERFORMANCE.md, "In the code"). A row only let go of its lease keeps its
            // next_attempt_at, so that update stays heap-only. Whether the lease is this claim's is
            // decided on the row being updated (`f`), not on the probe's snapshot, so a lease written
            // meanwhile by a claim after this one's ran out is left alone.
            try await connection.preparedQuery(
                """
                UPDATE deliveries f SET
                    next_attempt_at = CASE WHEN l.hold OR f.next_attempt_at > l.until THEN l.until ELSE f.next_attempt_at END,
                    leased_until = CASE WHEN f.leased_until IS NOT NULL AND (l.lease IS NULL OR f.leased_until = l.lease)
                                        THEN NULL ELSE f.leased_until END
                FROM unnest(
                    \(lasts.map(\.accountID))::text[], \(lasts.map(\.endpointID))::uuid[],
                    \(lasts.map(\.eventSequence))::bigint[], \(lasts.map(\.deliveryID))::bigint[],
                    \(holds)::boolean[], \(untils)::timestamptz[], \(lastLeases)::timestamptz[]
                ) AS v(account_id, endpoint_id, event_sequence, delivery_id, hold, until, lease)
                CROSS JOIN LATERAL (
                    SELECT x.account_id, x.delivery_id, v.hold, v.until, v.lease
                    FROM deliveries x
                    WHERE x.endpoint_id = v.endpoint_id AND x.account_id = v.account_id AND x.status = 'pending'
                      AND (x.event_sequence, x.delivery_id) > (v.event_sequence, v.delivery_id)
                      AND (v.hold OR x.next_attempt_at > v.until
                           OR (x.leased_until IS NOT NULL AND (v.lease IS NULL OR x.leased_until = v.lease)))
                    OFFSET 0) AS l
                WHERE f.account_id = l.account_id AND f.delivery_id = l.delivery_id
                """
            )
        }
    }

    /// `record`'s endpoint health, per endpoint: any success in the batch clears the failure clock.
    private func recordHealth(of results: [AttemptResult], disableAfter: TimeInterval, now: Date, on connection: Connection) async throws {
        var succeeded = Set<UUID>()
        var failed = Set<UUID>()
        var gone = Set<UUID>()
        for result in results {
            switch result.outcome {
            case .succeeded: succeeded.insert(result.endpointID)
            case .retry, .dead: failed.insert(result.endpointID)
            case .gone: gone.insert(result.endpointID)
            }
        }
        failed.subtract(succeeded)
        if !succeeded.isEmpty {
            // Read first, write only what changes: on Citus any write of this reference table,
            // even one that changes no row, commits in two phases on every node
            // (docs/CITUS.md, "Scale-out: the plan").
            let recovered = try await connection.preparedQuery(
                "SELECT endpoint_id FROM webhook_endpoints WHERE endpoint_id = ANY(\(Array(succeeded))::uuid[]) AND failing_since IS NOT NULL"
            ).map { try $0.decode(UUID.self, at: 0) }
            if !recovered.isEmpty {
                try await connection.preparedQuery(
                    "UPDATE webhook_endpoints SET failing_since = NULL WHERE endpoint_id = ANY(\(recovered)::uuid[]) AND failing_since IS NOT NULL"
                )
            }
        }
        if !failed.isEmpty {
            try await connection.preparedQuery(
                """
                UPDATE webhook_endpoints SET
                    failing_since = COALESCE(failing_since, \(now)),
                    enabled = CASE WHEN failing_since < \(now.addingTimeInterval(-disableAfter)) THEN false ELSE enabled END,
                    disabled_reason = CASE WHEN failing_since < \(now.addingTimeInterval(-disableAfter))
                                           THEN 'every delivery failed for too long' ELSE disabled_reason END,
                    updated_at = now()
                WHERE endpoint_id = ANY(\(Array(failed))::uuid[])
                """
            )
        }
        if !gone.isEmpty {
            try await connection.preparedQuery(
                """
                UPDATE webhook_endpoints SET enabled = false, disabled_reason = 'the endpoint answered 410 Gone', updated_at = now()
                WHERE endpoint_id = ANY(\(Array(gone))::uuid[])
                """
            )
        }
    }

    /// The last attempt of each stream (account and endpoint) in `results`, by event sequence:
    /// what `record` holds or lets go behind, and what a round recorded attempt by attempt lets
    /// go behind (`lettingGoOfStreams`).
    public static func lastAttempts(of results: [AttemptResult]) -> [AttemptResult] {
        var last: [StreamKey: AttemptResult] = [:]
        for result in results {
            let stream = StreamKey(accountID: result.accountID, endpointID: result.endpointID)
            if let seen = last[stream], (seen.eventSequence, seen.deliveryID) > (result.eventSequence, result.deliveryID) { continue }
            last[stream] = result
        }
        return Array(last.values)
    }

    /// A stream: an account's deliveries to one endpoint.
    private struct StreamKey: Hashable {
        var accountID: String
        var endpointID: UUID
    }

    /// A delivery's primary key.
    private struct DeliveryKey: Hashable {
        var accountID: String
        var deliveryID: Int64
    }

    /// Ends the lease of claimed deliveries that were not sent (their sender could not start
    /// them before its lease would have run out), so their streams can be claimed again now
    /// rather than when the lease ends. Nothing else changes: they are due as they were. Only
    /// rows that still hold the claim's lease are let go (see `record`).
    public func release(_ claimed: [Claimed], now: Date = Date()) async throws {
        guard !claimed.isEmpty else { return }
        guard let nodes, try await topology.isCitus(pool) else {
            try await pool.preparedQuery(Self.releaseQuery(claimed, shard: nil))
            return
        }
        // On Citus, each shard's on its node (see `record`), and the accounts due again now.
        var seen = Set<String>()
        let notesDue = nodes.deliveriesOnNodes
        for shard in nodes.byShard(claimed.map(\.accountID).filter { seen.insert($0).inserted }.sorted()) {
            let mine = Set(shard)
            try await nodes.withConnection(for: shard[0]) { connection in
                try await connection.withTransaction { connection in
                    try await connection.preparedQuery(Self.releaseQuery(claimed.filter { mine.contains($0.accountID) }, shard: shard))
                    if notesDue { try await Self.markDue(shard, at: [Date](repeating: now, count: shard.count), on: connection) }
                }
            }
        }
    }

    private static func releaseQuery(_ claimed: [Claimed], shard: [String]?) -> PostgresQuery {
        """
        UPDATE deliveries d SET leased_until = NULL
        FROM unnest(
            \(claimed.map(\.accountID))::text[], \(claimed.map(\.deliveryID))::bigint[], \(claimed.map(\.leasedUntil))::timestamptz[]
        ) AS v(account_id, delivery_id, lease)
        WHERE d.account_id = v.account_id AND d.delivery_id = v.delivery_id AND d.leased_until = v.lease
          \(shard, condition: "AND d.account_id = ANY(?::text[])")
        """
    }

    /// Moves the due deliveries that wait behind a pending delivery not yet due (retrying, or
    /// leased to a sender) to that delivery's time (its retry, or its lease's end), so claims stop reading them over and over
    /// while an endpoint is down. `record` lets them go once it is done. Returns how many.
    ///
    /// It starts from the due deliveries (what claims read), finds the waiting ones' heads, and
    /// locks those (FOR SHARE) so that a sender recording one of them at the same moment either
    /// goes first (the head no longer qualifies) or waits and then lets go of what this held;
    /// SKIP LOCKED leaves heads being claimed or recorded for next time.
    ///
    /// It looks at the first `window` due deliveries in time order (of every partition: what
    /// every claim reads first) and holds those of its partition, so a call's cost does not grow with
    /// the backlog (docs/PERFORMANCE.md, "How a path's cost grows with its data"). On Citus the
    /// window ends at the due time of the `window`-th, so all deliveries due at that same time are in
    /// it too (sql/0018). What lies further back is held when it comes to the front.
    /// Holding is only for the claims' sake: nothing depends on it for order.
    public func holdBlocked(
        partition: (index: Int, count: Int) = (0, 1), now: Date = Date(), window: Int = DeliveryStore.holdWindow
    ) async throws -> Int {
        if try await topology.isCitus(pool) {
            guard try await anyEndpointEnabled() else { return 0 }
            // `subsync_hold_blocked_deliveries` (sql/0018): the heads found without locks in the
            // window (a due time, there: see the migration), then each locked and its followers
            // moved with statements that name its account.
            let result = try await pool.preparedQuery(
                "SELECT subsync_hold_blocked_deliveries(\(now), \(partition.index), \(partition.count), \(window))"
            )
            if let nodes, nodes.deliveriesOnNodes { try await noteDueAccounts(nodes, partition: partition, now: now) }
            return try result[0].decode(Int.self, at: 0)
        }
        let result = try await pool.preparedQuery(
            """
            WITH front AS (
                -- The window is taken over every partition and filtered after: with the filter
                -- inside, the planner (which cannot estimate it) read the whole table and sorted
                -- it, 330 ms at a million due deliveries against 41 ms through the due index
                -- (deliveries_due_by_time since sql/0030).
                -- Only deliveries of enabled endpoints, which claims read: those of a disabled
                -- endpoint stay due and would fill the window for good.
                SELECT f.account_id, f.delivery_id, f.endpoint_id FROM (
                    SELECT d.account_id, d.delivery_id, d.endpoint_id FROM deliveries d
                    JOIN webhook_endpoints w ON w.endpoint_id = d.endpoint_id AND w.enabled
                    WHERE d.status = 'pending' AND d.next_attempt_at <= \(now)
                    ORDER BY d.next_attempt_at
                    LIMIT \(window)) f
                WHERE mod(hashtext(f.account_id)::bigint + 2147483648, \(partition.count)) = \(partition.index)
            ), blocked_heads AS (
                SELECT DISTINCT head.account_id, head.delivery_id
                FROM front f
                CROSS JOIN LATERAL (
                    SELECT first.account_id, first.delivery_id,
                           GREATEST(first.next_attempt_at, first.leased_until) AS blocked_until
                    FROM deliveries first
                    WHERE first.endpoint_id = f.endpoint_id AND first.account_id = f.account_id AND first.status = 'pending'
                    ORDER BY first.event_sequence, first.delivery_id
                    LIMIT 1
                ) head
                WHERE head.delivery_id <> f.delivery_id AND head.blocked_until > \(now)
            ), waiting AS (
                SELECT head.account_id, head.endpoint_id, head.event_sequence, head.delivery_id,
                       GREATEST(head.next_attempt_at, head.leased_until) AS blocked_until
                FROM deliveries head JOIN blocked_heads b ON head.account_id = b.account_id AND head.delivery_id = b.delivery_id
                WHERE head.status = 'pending' AND GREATEST(head.next_attempt_at, head.leased_until) > \(now)
                FOR SHARE OF head SKIP LOCKED
            )
            UPDATE deliveries f SET next_attempt_at = w.blocked_until
            FROM waiting w
            WHERE f.endpoint_id = w.endpoint_id AND f.account_id = w.account_id AND f.status = 'pending'
              AND (f.event_sequence, f.delivery_id) > (w.event_sequence, w.delivery_id) AND f.next_attempt_at <= \(now)
            """
        )
        return result.affectedRows
    }

    /// Whether any webhook endpoint is enabled. On Citus a claim and a hold ask first: with none,
    /// no delivery can be due (both read only enabled endpoints' deliveries), and finding that out
    /// from `deliveries` reads every shard, about a third of a second of the cluster's time a call
    /// on this project's machine, made every second by every delivery loop of every process
    /// (docs/CITUS.md, "How the pipeline runs on Citus"). The endpoints are a reference table,
    /// so this is a single-task read of one of its copies (on this project's clusters, a
    /// worker's: the coordinator holds none).
    private func anyEndpointEnabled() async throws -> Bool {
        try await pool.preparedQuery("SELECT EXISTS (SELECT 1 FROM webhook_endpoints WHERE enabled)")[0].decode(Bool.self, at: 0)
    }

    /// How many due deliveries `holdBlocked` looks at per call on one PostgreSQL: the claims of
    /// four loops read 500 of their own each, and about three times as many of the others'.
    public static let holdWindow = 10_000

    /// A delivery as operators list it.
    public struct Summary: Sendable, Codable, Equatable {
        public var accountID: String
        public var deliveryID: Int64
        public var endpointID: UUID
        public var eventID: UUID
        public var eventSequence: Int64
        public var eventType: String
        public var status: String
        public var attempts: Int
        public var nextAttemptAt: Date
        public var lastStatusCode: Int?
        public var lastError: String?
        public var createdAt: Date

        enum CodingKeys: String, CodingKey {
            case accountID = "account_id"
            case deliveryID = "delivery_id"
            case endpointID = "endpoint_id"
            case eventID = "event_id"
            case eventSequence = "event_sequence"
            case eventType = "event_type"
            case status, attempts
            case nextAttemptAt = "next_attempt_at"
            case lastStatusCode = "last_status_code"
            case lastError = "last_error"
            case createdAt = "created_at"
        }
    }

    /// Deliveries, newest first, optionally by status and endpoint.
    public func list(status: String? = nil, endpoint: UUID? = nil, limit: Int = 100) async throws -> [Summary] {
        let rows = try await pool.query(
            """
            SELECT d.account_id, d.delivery_id, d.endpoint_id, d.event_id, d.event_sequence, e.type, d.status, d.attempts,
                   d.next_attempt_at, d.last_status_code, d.last_error, d.created_at
            FROM deliveries d JOIN events e ON e.account_id = d.account_id AND e.sequence = d.event_sequence
            WHERE (\(status)::text IS NULL OR d.status = \(status)) AND (\(endpoint)::uuid IS NULL OR d.endpoint_id = \(endpoint))
            ORDER BY d.created_at DESC, d.delivery_id DESC
            LIMIT \(limit)
            """
        )
        return try rows.map(Self.summary(from:))
    }

    /// Makes dead (or cancelled, or failed pending) deliveries due again now, with a fresh set
    /// of attempts: the retry schedule starts again, while the count of attempts goes on (so
    /// each attempt keeps its own number in the delivery's history). `deliveryID` nil means
    /// every dead delivery. Returns how many.
    public func retry(deliveryID: Int64?, endpoint: UUID? = nil) async throws -> Int {
        let rows = try await pool.query(
            """
            WITH retried AS (
                UPDATE deliveries SET status = 'pending', attempts_before_retry = attempts, next_attempt_at = now(), completed_at = NULL
                WHERE (\(deliveryID)::bigint IS NULL AND status = 'dead' OR delivery_id = \(deliveryID) AND status <> 'succeeded')
                  AND (\(endpoint)::uuid IS NULL OR endpoint_id = \(endpoint))
                RETURNING account_id, endpoint_id, event_sequence, delivery_id
            ), \(unescaped: Self.releaseFollowers(of: "retried"))
            SELECT count(*) FROM retried
            """
        )
        let count = try rows[0].decode(Int.self, at: 0)
        if count > 0 {
            try await Self.noteEveryDueAccount(pool: pool)
            try await Outbox.wakeDeliveryLoops(pool: pool)
        }
        return count
    }

    /// On Citus with due deliveries kept by bucket (sql/0048), notes every account with
    /// deliveries due now, and not leased, as due in its bucket: after an operator's `retry`,
    /// `cancel` (what waited behind) or `replay`, and an endpoint enabled again, which write
    /// deliveries from the coordinator, so that the loops take them now rather than at their
    /// hold's next look (``holdBlocked(partition:now:window:)``). A read of every shard and a
    /// write that Citus spreads to the buckets: an operator's price, not a request's. Nothing
    /// on one PostgreSQL, whose claim reads `deliveries` itself.
    public static func noteEveryDueAccount(pool: ConnectionPool, now: Date = Date()) async throws {
        let kept = try await pool.preparedQuery(
            "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AND to_regclass('delivery_work') IS NOT NULL")
        guard try kept[0].decode(Bool.self, at: 0) else { return }
        let distributed = try await pool.preparedQuery(
            "SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'delivery_work'::regclass)")
        guard try distributed[0].decode(Bool.self, at: 0) else { return }
        try await pool.preparedQuery(
            """
            INSERT INTO delivery_work (bucket, account_id, due_at)
            SELECT subsync_work_bucket(d.account_id), d.account_id, \(now) FROM deliveries d
            JOIN webhook_endpoints w ON w.endpoint_id = d.endpoint_id AND w.enabled
            WHERE d.status = 'pending' AND d.next_attempt_at <= \(now) AND (d.leased_until IS NULL OR d.leased_until <= \(now))
            GROUP BY d.account_id
            ON CONFLICT (bucket, account_id) DO UPDATE SET due_at = EXCLUDED.due_at WHERE delivery_work.due_at > EXCLUDED.due_at
            """
        )
    }

    /// A CTE that makes due now what waits behind the deliveries of CTE `name` in their streams
    /// (held back by an earlier failure), for when those deliveries are retried now or given up.
    /// It skips rows `name` changed itself: those were not pending in the statement's snapshot
    /// unless they are `name`'s own rows, which are never behind themselves.
    private static func releaseFollowers(of name: String) -> String {
        """
        released AS (
            UPDATE deliveries f SET next_attempt_at = now()
            FROM \(name) r
            WHERE f.account_id = r.account_id AND f.endpoint_id = r.endpoint_id AND f.status = 'pending'
              AND (f.event_sequence, f.delivery_id) > (r.event_sequence, r.delivery_id) AND f.next_attempt_at > now()
        )
        """
    }

    /// What an operator's `cancel` came to.
    public enum CancelOutcome: Sendable, Equatable {
        case cancelled
        /// There is no pending delivery with that id.
        case notPending
        /// A delivery loop has the delivery out (claimed, leased until `until`): it may be on the
        /// wire now, or waiting behind earlier deliveries of its stream in that loop's round.
        /// Nothing changed; once that loop has recorded its round (or the lease has run out: a
        /// loop that died), a cancel can take effect.
        case beingSent(until: Date)
    }

    /// Gives up on a pending delivery (an operator's decision): it is `cancelled`, and the
    /// account's later events to that endpoint, which wait behind it, go out.
    ///
    /// Not while a sender has it out: a claim asks whether a stream is out with a sender of the
    /// stream's *pending* deliveries (sql/0026), so a delivery cancelled in flight would let a
    /// second sender take what follows it (a new event, a replay, a retry) while the first may
    /// still be sending it. That answer is ``CancelOutcome/beingSent(until:)``, and nothing
    /// changes. A loop's round usually takes milliseconds; with a slow receiver, up to the lease.
    public func cancel(deliveryID: Int64) async throws -> CancelOutcome {
        // A lease that ends, or a sender that records, between the update and the look at why
        // it did nothing is looked at again: at most a few times, as each needs a claim between.
        for _ in 0..<3 {
            let rows = try await pool.query(
                """
                WITH cancelled AS (
                    UPDATE deliveries SET status = 'cancelled', completed_at = now(), last_error = 'cancelled by an operator'
                    WHERE delivery_id = \(deliveryID) AND status = 'pending' AND (leased_until IS NULL OR leased_until <= now())
                    RETURNING account_id, endpoint_id, event_sequence, delivery_id
                ), \(unescaped: Self.releaseFollowers(of: "cancelled"))
                SELECT count(*) FROM cancelled
                """
            )
            if try rows[0].decode(Int.self, at: 0) > 0 {
                try await Self.noteEveryDueAccount(pool: pool)
                try await Outbox.wakeDeliveryLoops(pool: pool)
                return .cancelled
            }
            let now = try await pool.query(
                "SELECT status = 'pending', CASE WHEN leased_until > now() THEN leased_until END FROM deliveries WHERE delivery_id = \(deliveryID)"
            )
            guard let row = now.first, try row.decode(Bool.self, at: 0) else { return .notPending }
            if let until = try row.decode(Date?.self, at: 1) { return .beingSent(until: until) }
        }
        return .notPending
    }

    /// Sends the events that occurred in `[since, until)` to `endpoint` again, as new deliveries
    /// with the same event ids (so receivers can deduplicate). Returns how many.
    public func replay(endpoint: UUID, since: Date, until: Date?) async throws -> Int {
        let result = try await pool.query(
            """
            INSERT INTO deliveries (account_id, endpoint_id, event_sequence, event_id)
            SELECT e.account_id, w.endpoint_id, e.sequence, e.event_id
            FROM events e JOIN webhook_endpoints w ON w.endpoint_id = \(endpoint)
            WHERE e.occurred_at >= \(since) AND (\(until)::timestamptz IS NULL OR e.occurred_at < \(until))
              AND (w.event_types IS NULL OR e.type = ANY(w.event_types))
            ORDER BY e.account_id, e.sequence
            """
        )
        if result.affectedRows > 0 {
            try await Self.noteEveryDueAccount(pool: pool)
            try await Outbox.wakeDeliveryLoops(pool: pool)
        }
        return result.affectedRows
    }
}
