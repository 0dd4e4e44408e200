import Foundation
import Postgres
import SyncStore
import TestSupport
import Testing

/// The single-server form of a worker's account locks (sql/0033) and the Citus one, a bucket at a
/// time (sql/0043), answer what the per-account form (sql/0025, 0032) answers, in every case a
/// claim meets.
@Suite struct AccountLockTests {
    /// Accounts of every kind: existing and free, existing and held by another transaction,
    /// missing and free, missing and being created by another transaction (which holds the
    /// account's advisory lock, sql/0023). Each subset, in any order, gets the same rows from both
    /// functions; the new one takes an advisory lock only for the accounts it reserves.
    @Test func lockingAtOnceAnswersAsAccountByAccount() async throws {
        try await TestDatabase.withFreshDatabase { configuration in
            try await TestDatabase.withConnection(configuration) { connection in
                try await Migrator().migrate(connection: connection)
                _ = try await connection.execute(
                    script: """
                        INSERT INTO account_states (account_id, tier, state, last_sequence, resolved_at) VALUES
                            ('free-1', 'basic', '{"tier": "basic"}', 3, '2026-11-01T00:00:00Z'),
                            ('free-2', 'free', '{"tier": "free"}', 1, '2026-11-02T00:00:00Z'),
                            ('held', 'premium', '{"tier": "premium"}', 7, '2026-11-03T00:00:00Z')
                        """)
                let holder = try await Connection.connect(configuration: configuration)
                do {
                    // One bucket, as on one PostgreSQL; then several, as on Citus: each account's
                    // first letter, so the accounts of a claim span up to four buckets.
                    try await compare(on: connection, holder: holder)
                    _ = try await connection.execute(
                        script: """
                            CREATE OR REPLACE FUNCTION subsync_work_bucket(account text) RETURNS text
                            IMMUTABLE LANGUAGE sql AS $$ SELECT left(account, 1) $$
                            """)
                    try await compare(on: connection, holder: holder)
                } catch {
                    await holder.close()
                    throw error
                }
                await holder.close()
            }
        }
    }

    private func compare(on connection: Connection, holder: Connection) async throws {
        // The holder keeps its locks for as long as the test runs, however slow the machine (no
        // idle timeout ends its transaction: on one busy core the comparisons below take minutes).
        // The functions under test never wait for a lock; if one did, the tested connection's
        // lock_timeout turns the hang into an error, and before each comparison the holder is
        // checked to still hold both locks, so a comparison never runs against a lost holder.
        _ = try await holder.execute(
            script: """
                SET idle_in_transaction_session_timeout = 0; BEGIN;
                SELECT 1 FROM account_states WHERE account_id = 'held' FOR UPDATE;
                SELECT pg_advisory_xact_lock(2, hashtext('creating'));
                """)
        _ = try await connection.execute(script: "SET lock_timeout = '300s'")
        let holderPID = try await holder.query("SELECT pg_backend_pid()")[0].decode(Int.self, at: 0)

        let kinds = ["free-1", "free-2", "held", "new-1", "new-2", "creating"]
        var generator = SystemRandomNumberGenerator()
        var subsets = (1..<(1 << kinds.count)).map { mask in kinds.indices.filter { mask & (1 << $0) != 0 }.map { kinds[$0] } }
        subsets.shuffle(using: &generator)
        for subset in subsets {
            let ids = subset.shuffled(using: &generator)
            try #require(
                try await holdsBoth(holderPID, seenFrom: connection),
                "the holder (pid \(holderPID)) no longer holds 'held' and 'creating': the comparison would be meaningless")
            let perAccount = try await rows(
                "SELECT * FROM subsync_lock_account_states_to_resolve(\(ids.sorted())::text[], true)", on: connection)
            let atOnce = try await rows(
                "SELECT * FROM subsync_lock_account_states_skipping(\(ids)::text[])", on: connection)
            let byBucket = try await rows(
                "SELECT * FROM subsync_lock_account_states_by_bucket(\(ids)::text[])", on: connection)
            #expect(atOnce.rows == perAccount.rows, "accounts \(ids)")
            #expect(byBucket.rows == perAccount.rows, "accounts \(ids), a bucket at a time")
            let reserved = Set(subset).intersection(["new-1", "new-2"])
            #expect(atOnce.advisoryLocks == reserved.count, "accounts \(ids): \(atOnce.advisoryLocks) advisory locks for \(reserved.count) reserved")
            #expect(byBucket.advisoryLocks == reserved.count, "accounts \(ids), a bucket at a time: \(byBucket.advisoryLocks) advisory locks")
            // Every account is either locked, reserved, or left for a later claim.
            let expected = Set(subset).subtracting(["held", "creating"])
            #expect(Set(atOnce.rows.map { $0.split(separator: "|")[0] }.map(String.init)) == expected)
        }
        _ = try await holder.execute(script: "ROLLBACK")
    }

    /// Whether the holder's transaction still holds the row lock on 'held' and the advisory lock
    /// of 'creating' (both granted to its backend), as another connection sees it.
    private func holdsBoth(_ pid: Int, seenFrom connection: Connection) async throws -> Bool {
        let rows = try await connection.query(
            """
            SELECT (SELECT count(*) FROM pg_locks WHERE pid = \(pid) AND granted AND locktype = 'advisory'
                        AND classid = 2 AND objid = (hashtext('creating')::bigint & 4294967295)::oid)
                 + (SELECT count(*) FROM pg_locks WHERE pid = \(pid) AND granted AND locktype = 'transactionid')
            """)
        return try rows[0].decode(Int.self, at: 0) == 2
    }

    /// The rows a lock function returns, as text, sorted, with the advisory locks it left held;
    /// in a transaction rolled back afterwards, so each call starts from the same state.
    private func rows(_ query: PostgresQuery, on connection: Connection) async throws -> (rows: [String], advisoryLocks: Int) {
        _ = try await connection.execute(script: "BEGIN")
        do {
            let result = try await connection.query(query)
            let rows = try result.map { row in
                [try row.decode(String.self, at: 0), try row.decode(String?.self, at: 1) ?? "NULL",
                 String(try row.decode(Int64.self, at: 2)), "\(try row.decode(Date.self, at: 3).timeIntervalSince1970)"]
                    .joined(separator: "|")
            }.sorted()
            let locks = try await connection.query(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted")
            _ = try await connection.execute(script: "ROLLBACK")
            return (rows, try locks[0].decode(Int.self, at: 0))
        } catch {
            _ = try? await connection.execute(script: "ROLLBACK")
            throw error
        }
    }
}
