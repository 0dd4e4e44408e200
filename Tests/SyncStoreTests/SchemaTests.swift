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
                // claim queue (sql/0014) and the operator audit log (sql/0015) stay on the
                // coordinator.
                let exempt: Set<String> = [
                    "webhook_endpoints", "schema_migrations", "reconcile_checkpoints", "account_work", "operator_actions",
                    "transaction_owners", "app_account_tokens", "store_notifications", "rate_buckets",
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
}
