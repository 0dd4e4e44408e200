import Foundation
import Postgres

/// The distribution step for Citus, run after the migrations on the coordinator by
/// `subsync distribute`: apart from the migrations, which stay plain PostgreSQL, idempotent (a
/// table already distributed is left as it is), and nothing without the `citus` extension.
/// Where every table goes, and why: docs/CITUS.md, "The distribution step".
public struct Distribution: Sendable {
    public enum Placement: Sendable, Equatable, Codable {
        /// Hash-distributed by `column`, co-located with another table (`none`: a group of its
        /// own; `nil`: the anchor of a new group).
        case distributed(column: String, colocatedWith: String?)
        case reference
    }

    /// Tables in the order they are distributed (the co-location anchor first).
    public static let plan: [(table: String, placement: Placement)] = [
        ("account_states", .distributed(column: "account_id", colocatedWith: nil)),
        ("devices", .distributed(column: "account_id", colocatedWith: "account_states")),
        ("reports", .distributed(column: "account_id", colocatedWith: "account_states")),
        ("transactions", .distributed(column: "account_id", colocatedWith: "account_states")),
        ("entitlements", .distributed(column: "account_id", colocatedWith: "account_states")),
        ("events", .distributed(column: "account_id", colocatedWith: "account_states")),
        ("deliveries", .distributed(column: "account_id", colocatedWith: "account_states")),
        ("delivery_attempts", .distributed(column: "account_id", colocatedWith: "account_states")),
        ("usage_entries", .distributed(column: "account_id", colocatedWith: "account_states")),
        ("usage_holds", .distributed(column: "account_id", colocatedWith: "account_states")),
        ("usage_periods", .distributed(column: "account_id", colocatedWith: "account_states")),
        ("usage_totals", .distributed(column: "account_id", colocatedWith: "account_states")),
        ("store_expiry_checks", .distributed(column: "account_id", colocatedWith: "account_states")),
        // One row per claim queue bucket, placed with the bucket's accounts: the accounts'
        // advisory locks are taken through it, on their node (sql/0046).
        ("work_anchors", .distributed(column: "bucket", colocatedWith: "account_states")),
        // The claim queue, by bucket: each bucket's entries on the node of its accounts, so a
        // worker claims and resolves a batch there (sql/0047; its entries are moved to their
        // buckets below, after the bucket function).
        ("account_work", .distributed(column: "bucket", colocatedWith: "account_states")),
        // Due deliveries by bucket, likewise, for the delivery loops' claims (sql/0048). A row
        // in a stale bucket is deleted below; the loops' hold writes it again in its bucket.
        ("delivery_work", .distributed(column: "bucket", colocatedWith: "account_states")),
        ("transaction_owners", .distributed(column: "original_transaction_id", colocatedWith: "none")),
        ("app_account_tokens", .distributed(column: "app_account_token", colocatedWith: "none")),
        ("store_notifications", .distributed(column: "notification_uuid", colocatedWith: "none")),
        ("rate_buckets", .distributed(column: "key", colocatedWith: "none")),
        ("webhook_endpoints", .reference),
    ]

    /// What one run did.
    public struct Outcome: Sendable, Equatable, Codable {
        /// False on a database without the `citus` extension: nothing was done.
        public var citus: Bool
        /// Tables distributed (or made reference tables) by this run.
        public var distributed: [String]
        /// Tables that already were.
        public var alreadyDistributed: [String]
        /// The claim queue's buckets, one per shard of `account_states` (0 without Citus).
        public var buckets: Int = 0
        /// Queue entries this run moved to their account's bucket.
        public var requeued: Int = 0

        enum CodingKeys: String, CodingKey {
            case citus, distributed, buckets, requeued
            case alreadyDistributed = "already_distributed"
        }
    }

    /// A table the plan names that the schema does not have: the binary and the database disagree.
    public struct MissingTable: Error, CustomStringConvertible {
        public var table: String
        public var description: String { "table \(table) does not exist: run subsync migrate first" }
    }

    let pool: ConnectionPool

    public init(pool: ConnectionPool) {
        self.pool = pool
    }

    /// Distributes every table of ``plan`` not distributed yet.
    public func run() async throws -> Outcome {
        try await pool.withConnection { connection in
            let citus = try await connection.preparedQuery("SELECT count(*) FROM pg_extension WHERE extname = 'citus'")
            guard try citus[0].decode(Int64.self, at: 0) > 0 else {
                return Outcome(citus: false, distributed: [], alreadyDistributed: [])
            }
            var outcome = Outcome(citus: true, distributed: [], alreadyDistributed: [])
            for (table, placement) in Self.plan {
                let exists = try await connection.preparedQuery("SELECT to_regclass(\(table)) IS NOT NULL")
                guard try exists[0].decode(Bool.self, at: 0) else { throw MissingTable(table: table) }
                let done = try await connection.preparedQuery(
                    "SELECT count(*) FROM pg_dist_partition WHERE logicalrelid = to_regclass(\(table))")
                if try done[0].decode(Int64.self, at: 0) > 0 {
                    outcome.alreadyDistributed.append(table)
                    continue
                }
                switch placement {
                case .distributed(let column, let colocatedWith):
                    try await connection.preparedQuery(
                        "SELECT create_distributed_table(\(table), \(column), colocate_with => \(colocatedWith ?? "default"))")
                case .reference:
                    try await connection.preparedQuery("SELECT create_reference_table(\(table))")
                }
                outcome.distributed.append(table)
            }
            // Three statements: a function's body is read when a statement is planned, so the
            // entries are moved by one planned after the new function is in place.
            try await connection.preparedQuery(Self.bucketFunctionSQL)
            let buckets = try await connection.preparedQuery(
                "SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'account_states'::regclass")
            outcome.buckets = Int(try buckets[0].decode(Int64.self, at: 0))
            // `bucket` is the queue's distribution column, which no `UPDATE` may change: an entry
            // in another bucket than its account's is deleted and inserted again, in one
            // transaction, so that none is lost (a claim that holds one makes the move wait),
            // with its time queued: a moved entry keeps its age (its id is new).
            outcome.requeued = try await Self.moveToTheirBuckets(table: "account_work", time: "queued_at", on: connection)
            // Due deliveries' rows likewise, and one for every account with pending deliveries
            // (an upgrade to sql/0048, or rows lost), so that the loops find them at once.
            _ = try await Self.moveToTheirBuckets(table: "delivery_work", time: "due_at", on: connection)
            try await connection.preparedQuery(
                """
                INSERT INTO delivery_work (bucket, account_id, due_at)
                SELECT subsync_work_bucket(account_id), account_id, min(next_attempt_at) FROM deliveries
                WHERE status = 'pending' GROUP BY account_id
                ON CONFLICT DO NOTHING
                """)
            return outcome
        }
    }

    /// Moves the rows of `table` (`account_work` or `delivery_work`, keyed by `bucket` and
    /// holding `account_id` and the timestamp `time`) whose bucket is not their account's to
    /// their account's, keeping `time`, in one transaction. Returns how many moved.
    private static func moveToTheirBuckets(table: String, time: String, on connection: Connection) async throws -> Int {
        try await connection.withTransaction { connection in
            let stale = try await connection.preparedQuery(
                "DELETE FROM \(unescaped: table) WHERE bucket <> subsync_work_bucket(account_id) RETURNING account_id, \(unescaped: time)"
            ).map { (try $0.decode(String.self, at: 0), try $0.decode(Date.self, at: 1)) }
            if !stale.isEmpty {
                try await connection.preparedQuery(
                    """
                    INSERT INTO \(unescaped: table) (bucket, account_id, \(unescaped: time))
                    SELECT subsync_work_bucket(a), a, t FROM unnest(\(stale.map(\.0))::text[], \(stale.map(\.1))::timestamptz[]) AS m(a, t)
                    \(unescaped: table == "delivery_work" ? "ON CONFLICT DO NOTHING" : "")
                    """)
            }
            return stale.count
        }
    }

    /// Writes `subsync_work_bucket` (sql/0043) for the cluster as it is: one anchor per shard of
    /// `account_states`, the first `'b' || k` Citus places in that shard (a few hundred tries for
    /// 32 shards), and the function maps an account to its shard's anchor. While the shard ranges
    /// are Citus's uniform split, it is arithmetic on `hashtext`, the hash Citus uses for text
    /// (0.4 µs a call: PostgreSQL inlines it); after a split, a `CASE` over the real ranges (9 µs).
    /// Run again, it writes the same function; after a shard split, run `distribute` again.
    /// docs/CITUS.md, "Scale-out: the plan".
    static let bucketFunctionSQL: PostgresQuery = """
        DO $$
        DECLARE
            shard_ids bigint[];
            lows bigint[];
            highs bigint[];
            anchors text[];
            shards integer;
            found_count integer := 0;
            step bigint;
            position integer;
            k bigint := 0;
            uniform boolean := true;
            body text;
        BEGIN
            SELECT array_agg(shardid ORDER BY shardminvalue::bigint), array_agg(shardminvalue::bigint ORDER BY shardminvalue::bigint),
                   array_agg(shardmaxvalue::bigint ORDER BY shardminvalue::bigint)
            INTO shard_ids, lows, highs
            FROM pg_dist_shard WHERE logicalrelid = 'account_states'::regclass;
            shards := coalesce(cardinality(shard_ids), 0);
            IF shards = 0 THEN
                RETURN;
            END IF;
            anchors := array_fill(NULL::text, ARRAY[shards]);
            -- The first 'b' || k Citus places in each shard: a few hundred tries for 32 shards.
            WHILE found_count < shards LOOP
                IF k > 100 * shards + 100000 THEN
                    RAISE EXCEPTION 'no claim queue bucket found for every shard of account_states';
                END IF;
                position := array_position(shard_ids, get_shard_id_for_distribution_column('account_states', 'b' || k));
                IF position IS NOT NULL AND anchors[position] IS NULL THEN
                    anchors[position] := 'b' || k;
                    found_count := found_count + 1;
                END IF;
                k := k + 1;
            END LOOP;
            step := 4294967296 / shards;
            FOR i IN 1..shards LOOP
                uniform := uniform AND lows[i] = -2147483648 + (i - 1) * step;
            END LOOP;
            IF uniform THEN
                body := format('SELECT (%L::text[])[(1 + least(%s, (hashtext(account)::bigint + 2147483648) / %s))::int]',
                               anchors, shards - 1, step);
            ELSE
                SELECT 'SELECT CASE ' || string_agg(format('WHEN h <= %s THEN %L', highs[i], anchors[i]), ' ' ORDER BY i)
                       || ' END FROM (SELECT hashtext(account) AS h) AS x'
                INTO body FROM generate_series(1, shards) AS i;
            END IF;
            EXECUTE format(
                'CREATE OR REPLACE FUNCTION subsync_work_bucket(account text) RETURNS text IMMUTABLE PARALLEL SAFE LANGUAGE sql AS %L',
                body);
            -- Each bucket's anchor row, committed with the function (sql/0046).
            INSERT INTO work_anchors (bucket) SELECT unnest(anchors) ON CONFLICT DO NOTHING;
        END
        $$
        """
}
