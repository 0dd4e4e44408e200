import Foundation
import Postgres

extension Reconciler {
    /// The next `limit` account ids after `cursor` (keyset pagination on `account_id`, in the
    /// database's order), so `--all` reads the accounts in bounded batches however many exist.
    ///
    /// Without `since`: every account with a state row, a transaction or a report (so an account
    /// whose state row was lost is still visited). With `since`: accounts with a report received
    /// at or after it.
    public func accountPage(after cursor: String, since: Date?, limit: Int) async throws -> [String] {
        let rows: QueryResult
        if let since {
            rows = try await pool.preparedQuery(
                """
                SELECT DISTINCT account_id FROM reports
                WHERE account_id > \(cursor) AND received_at >= \(since)
                ORDER BY account_id LIMIT \(limit)
                """
            )
        } else {
            // Each branch walks its primary key from the cursor; the union of their first
            // `limit` ids contains the overall first `limit`.
            rows = try await pool.preparedQuery(
                """
                SELECT id FROM (
                    (SELECT account_id AS id FROM account_states WHERE account_id > \(cursor) ORDER BY account_id LIMIT \(limit))
                    UNION
                    (SELECT DISTINCT account_id FROM transactions WHERE account_id > \(cursor) ORDER BY account_id LIMIT \(limit))
                    UNION
                    (SELECT DISTINCT account_id FROM reports WHERE account_id > \(cursor) ORDER BY account_id LIMIT \(limit))
                ) AS u ORDER BY id LIMIT \(limit)
                """
            )
        }
        return try rows.map { try $0.decode(String.self, at: 0) }
    }

    /// How many accounts a run will visit, for the progress display (an estimate: accounts
    /// appear while it runs).
    public func estimatedAccountCount(since: Date?) async throws -> Int {
        let rows: QueryResult
        if let since {
            rows = try await pool.preparedQuery("SELECT count(DISTINCT account_id) FROM reports WHERE received_at >= \(since)")
        } else {
            rows = try await pool.preparedQuery("SELECT count(*) FROM account_states")
        }
        return try rows[0].decode(Int.self, at: 0)
    }

    /// Whether anything at all is stored for `accountID`.
    public func accountExists(_ accountID: String) async throws -> Bool {
        let rows = try await pool.preparedQuery(
            """
            SELECT EXISTS (SELECT 1 FROM account_states WHERE account_id = \(accountID))
                OR EXISTS (SELECT 1 FROM transactions WHERE account_id = \(accountID))
                OR EXISTS (SELECT 1 FROM reports WHERE account_id = \(accountID))
            """
        )
        return try rows[0].decode(Bool.self, at: 0)
    }

    /// Where an interrupted `--all` run stopped (`reconcile_checkpoints`).
    public struct Checkpoint: Sendable, Equatable {
        /// The kind of run: `all`, `all --dry-run`, with ` since <time>` when limited.
        public var name: String
        /// The last account completely done; the run resumes after it.
        public var lastAccountID: String
        public var accountsDone: Int
        public var differences: Int
        public var startedAt: Date

        public init(name: String, lastAccountID: String, accountsDone: Int, differences: Int, startedAt: Date) {
            self.name = name
            self.lastAccountID = lastAccountID
            self.accountsDone = accountsDone
            self.differences = differences
            self.startedAt = startedAt
        }
    }

    /// The checkpoint of runs of kind `name`, if one was interrupted.
    public func checkpoint(named name: String) async throws -> Checkpoint? {
        let rows = try await pool.preparedQuery(
            """
            SELECT last_account_id, accounts_done, differences, started_at FROM reconcile_checkpoints WHERE name = \(name)
            """
        )
        guard let row = rows.first else { return nil }
        return Checkpoint(
            name: name, lastAccountID: try row.decode(String.self, at: 0), accountsDone: try row.decode(Int.self, at: 1),
            differences: try row.decode(Int.self, at: 2), startedAt: try row.decode(Date.self, at: 3))
    }

    /// Records progress after a batch (an upsert, one row per kind of run).
    public func saveCheckpoint(_ checkpoint: Checkpoint, dryRun: Bool) async throws {
        try await pool.preparedQuery(
            """
            INSERT INTO reconcile_checkpoints (name, last_account_id, dry_run, accounts_done, differences, started_at, updated_at)
            VALUES (\(checkpoint.name), \(checkpoint.lastAccountID), \(dryRun), \(Int64(checkpoint.accountsDone)),
                    \(Int64(checkpoint.differences)), \(checkpoint.startedAt), now())
            ON CONFLICT (name) DO UPDATE SET
                last_account_id = EXCLUDED.last_account_id, dry_run = EXCLUDED.dry_run,
                accounts_done = EXCLUDED.accounts_done, differences = EXCLUDED.differences,
                started_at = EXCLUDED.started_at, updated_at = now()
            """
        )
    }

    /// Forgets the checkpoint of a run that completed.
    public func deleteCheckpoint(named name: String) async throws {
        try await pool.preparedQuery("DELETE FROM reconcile_checkpoints WHERE name = \(name)")
    }
}
