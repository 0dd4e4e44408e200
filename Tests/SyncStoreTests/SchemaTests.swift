import Foundation
import Postgres
import SyncStore
import TestSupport
import Testing

/// Properties of the schema that the design relies on.
@Suite struct SchemaTests {
    /// Every per-account table is keyed by `account_id` first, so it can be distributed by it.
    @Test func perAccountTablesAreKeyedByAccountFirst() async throws {
        try await TestDatabase.withFreshDatabase { configuration in
            try await TestDatabase.withConnection(configuration) { connection in
                try await Migrator().migrate(connection: connection)
                let rows = try await connection.query(
                    """
                    SELECT c.relname::text,
                           (SELECT a.attname::text FROM pg_attribute a
                             WHERE a.attrelid = c.oid AND a.attnum = i.indkey[0]) AS first_key_column
                    FROM pg_class c
                    JOIN pg_namespace n ON n.oid = c.relnamespace
                    LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary
                    WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
                    ORDER BY 1
                    """
                )
                // Global tables, the trust lookups that exist to *find* an account by the
                // store's ids (sql/0004_trust.sql), and the rate-limit buckets (sql/0009, keyed by
                // a bucket key that holds the account id): distributed by their own key. The
                // claim queue (sql/0014), the operator audit log (sql/0015) and the notification
                // backfill's checkpoint (sql/0038) stay on the coordinator. The anchors of the
                // accounts' advisory locks (sql/0046) and the due deliveries (sql/0048) are keyed
                // by the bucket they stand for, which Citus places with that bucket's accounts.
                let exempt: Set<String> = [
                    "webhook_endpoints", "schema_migrations", "reconcile_checkpoints", "account_work", "operator_actions", "store_backfill", "token_revocations",
                    "transaction_owners", "app_account_tokens", "store_notifications", "rate_buckets", "work_anchors", "delivery_work",
                ]
                var checked = 0
                for row in rows {
                    let table = try row.decode(String.self, at: 0)
                    guard !exempt.contains(table) else { continue }
                    let first = try row.decode(String?.self, at: 1)
                    #expect(first == "account_id", "\(table): primary key starts with \(first ?? "nothing (no primary key)")")
                    checked += 1
                }
                #expect(checked >= 3, "only \(checked) per-account tables found")
                #expect(Set(try rows.map { try $0.decode(String.self, at: 0) }).isSuperset(of: exempt))
            }
        }
    }

    /// The lock functions of sql/0014 find each row by its key, whatever the table's size when
    /// the connection cached their plans (sql/0022). Autovacuum analyzes a table after its first
    /// 50 changed rows; a plan cached then is a sequential scan (one page), and it stays until
    /// the next analyze, up to a minute later, however much the table grew meanwhile: without
    /// `enable_seqscan = off` each key would be a scan of the whole table (docs/PERFORMANCE.md,
    /// *How a path's cost grows with its data*).
    @Test func lockFunctionsReadByKeyAfterTheTableGrew() async throws {
        try await TestDatabase.withFreshDatabase { configuration in
            try await TestDatabase.withConnection(configuration) { connection in
                try await Migrator().migrate(connection: connection)
                let functions: [(table: String, key: (Int) -> String, fill: (Int, Int) -> String, call: (String) -> String)] = [
                    ("account_states", { "'a-\($0)'" },
                     { "INSERT INTO account_states (account_id, tier, state) SELECT 'a-' || n, 'free', '{}' FROM generate_series(\($0), \($1)) n" },
                     { "SELECT count(*) FROM subsync_lock_account_states(ARRAY[\($0)], false)" }),
                    ("transaction_owners", { "'a-\($0)'" },
                     { "INSERT INTO transaction_owners (original_transaction_id, account_id) SELECT 'a-' || n, 'x' FROM generate_series(\($0), \($1)) n" },
                     { "SELECT count(*) FROM subsync_lock_transaction_owners(ARRAY[\($0)])" }),
                    ("app_account_tokens", { "md5('a-\($0)')::text" },
                     { "INSERT INTO app_account_tokens (app_account_token, account_id) SELECT md5('a-' || n)::uuid, 'x' FROM generate_series(\($0), \($1)) n" },
                     { "SELECT count(*) FROM subsync_lock_app_account_tokens(ARRAY[\($0)]::text[]::uuid[])" }),
                    // The claim's lock (sql/0025), on the same table with keys of its own.
                    ("account_states", { "'r-\($0)'" },
                     { "INSERT INTO account_states (account_id, tier, state) SELECT 'r-' || n, 'free', '{}' FROM generate_series(\($0), \($1)) n" },
                     { "SELECT count(*) FROM subsync_lock_account_states_to_resolve(ARRAY[\($0)], false)" }),
                    // A worker's claim on one PostgreSQL (sql/0033).
                    ("account_states", { "'s-\($0)'" },
                     { "INSERT INTO account_states (account_id, tier, state) SELECT 's-' || n, 'free', '{}' FROM generate_series(\($0), \($1)) n" },
                     { "SELECT count(*) FROM subsync_lock_account_states_skipping(ARRAY[\($0)])" }),
                ]
                for function in functions {
                    let key = function.key
                    // A young table, analyzed as autovacuum does after 50 rows; more than five
                    // calls: PL/pgSQL now keeps a generic plan, made for one page.
                    _ = try await connection.execute(script: function.fill(1, 60))
                    _ = try await connection.execute(script: "ANALYZE \(function.table)")
                    for n in 1...8 {
                        _ = try await connection.execute(script: function.call(key(n)))
                    }
                    // It grows before the next analyze.
                    _ = try await connection.execute(script: function.fill(61, 3000))
                    _ = try await connection.execute(script: "BEGIN")
                    let keys = (1000..<1050).map(key).joined(separator: ", ")
                    let locked = try await connection.execute(script: function.call(keys))
                    // Rows read by sequential scans (pending statistics of this backend, which
                    // may include the calls before it grew: those read at most 480).
                    let read = try await connection.execute(
                        script: "SELECT seq_tup_read FROM pg_stat_xact_user_tables WHERE relname = '\(function.table)'")
                    _ = try await connection.execute(script: "COMMIT")
                    #expect(try locked.first?.decode(Int64.self, at: 0) == 50, "\(function.table): not every row was locked")
                    let rowsRead = try read.first?.decode(Int64.self, at: 0) ?? -1
                    #expect(rowsRead < 3000, "\(function.table): locking 50 keys read \(rowsRead) rows of 3,000 by sequential scans")
                }
            }
        }
    }

    /// A worker's claim (`status = 'pending' AND account_id = ANY(...)`, as in
    /// `ResolutionEngine.claim`) reads its accounts' pending reports only, even when the
    /// statistics were taken while few reports were pending and a backlog came after them (an
    /// outage of the workers, an import). An index of pending reports in arrival order matches
    /// the claim too, and the planner, taking it for small, reads all of it for every claim
    /// (3,000 index entries here for 50 reports; docs/PERFORMANCE.md,
    /// *How a path's cost grows with its data*).
    @Test func claimReadsOnlyItsAccountsPendingReportsWithStaleStatistics() async throws {
        try await TestDatabase.withFreshDatabase { configuration in
            try await TestDatabase.withConnection(configuration) { connection in
                try await Migrator().migrate(connection: connection)
                _ = try await connection.execute(
                    script: """
                        ALTER TABLE reports SET (autovacuum_enabled = false);
                        INSERT INTO reports (account_id, report_id, device_id, observed_at, product_id, original_transaction_id, transaction_id, purchased_at, status)
                        SELECT 'old-' || n, 'r', 'd', now(), 'p', 't' || n, 't' || n, now(), 'resolved' FROM generate_series(1, 3000) n;
                        ANALYZE reports;
                        INSERT INTO reports (account_id, report_id, device_id, observed_at, product_id, original_transaction_id, transaction_id, purchased_at)
                        SELECT 'new-' || (n / 5), 'r' || n, 'd', now(), 'p', 'u' || n, 'u' || n, now() FROM generate_series(0, 2999) n
                        """)
                // (Autovacuum is off for the table: its analyze after the backlog, which sql/0029
                // makes likely within a minute, would make the statistics fresh.)
                _ = try await connection.execute(script: "BEGIN")
                let claimed = try await connection.execute(
                    script: """
                        WITH claimed AS (
                            UPDATE reports SET status = 'resolved'
                            WHERE status = 'pending' AND account_id = ANY(ARRAY(SELECT 'new-' || n FROM generate_series(100, 109) n))
                            RETURNING 1)
                        SELECT count(*) FROM claimed
                        """)
                // Rows this transaction read from the table and from its indexes.
                let read = try await connection.execute(
                    script: """
                        SELECT (SELECT seq_tup_read FROM pg_stat_xact_user_tables WHERE relname = 'reports')
                             + (SELECT sum(pg_stat_get_xact_tuples_returned(indexrelid)) FROM pg_index WHERE indrelid = 'reports'::regclass)::bigint
                        """)
                _ = try await connection.execute(script: "COMMIT")
                #expect(try claimed.first?.decode(Int64.self, at: 0) == 50)
                let rowsRead = try read.first?.decode(Int64.self, at: 0) ?? -1
                #expect(rowsRead >= 50 && rowsRead < 500, "claiming 10 accounts' 50 reports read \(rowsRead) rows and index entries of 6,000 reports")
            }
        }
    }
}
