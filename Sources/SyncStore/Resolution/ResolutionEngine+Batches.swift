import Foundation
import Logging
import Postgres
import SyncCore

extension ResolutionEngine {
    /// Claims up to `limit` pending reports (oldest first, `FOR UPDATE SKIP LOCKED` so workers
    /// in any process take disjoint batches), resolves their accounts, and marks them resolved,
    /// all in one transaction.
    ///
    /// If the batch fails for a reason other than a lost connection, each of its accounts is
    /// retried on its own, so one bad account cannot hold up the others; that account's reports
    /// get their attempt counted and, after `maximumAttempts`, are quarantined with the error.
    public func resolvePendingBatch(limit: Int, maximumAttempts: Int = 5) async throws -> Outcome {
        var claimedAccounts: [String] = []
        do {
            return try await pool.withTransaction { connection in
                let claimed = try await claim(limit: limit, onlyAccount: nil, on: connection)
                claimedAccounts = Array(claimed.reports.keys).sorted()
                return try await resolveClaimed(claimed, on: connection)
            }
        } catch {
            guard !Self.isRetryable(error), !claimedAccounts.isEmpty else { throw error }
            logger.warning("batch failed; retrying its accounts one by one", metadata: ["error": "\(error)"])
            return try await resolveAccountsSeparately(claimedAccounts, limit: limit, maximumAttempts: maximumAttempts)
        }
    }

    /// Errors that say nothing about the reports: the connection, the pool, or contention.
    /// They are retried as they are, never counted against a report.
    static func isRetryable(_ error: any Error) -> Bool {
        if error is CancellationError { return true }
        guard let error = error as? PostgresError else { return false }
        if error.isConnectionLoss || error.kind == .poolTimeout || error.kind == .closed { return true }
        guard let state = error.sqlState else { return false }
        return state.isTransient || state == .lockNotAvailable || state == .queryCanceled
    }

    /// Resolves the accounts whose state changes with time alone (`next_transition_at` due), at
    /// most `limit` of them, skipping accounts another process is resolving right now.
    public func resolveDueAccounts(limit: Int) async throws -> Outcome {
        var dueAccounts: [String] = []
        do {
            return try await pool.withTransaction { connection in
                // Accounts whose state changes with time, then accounts whose usage periods have
                // ended unclosed (`usage.period_closed`, docs/USAGE.md), each with a limit of its
                // own so that neither can starve the other, and both locked without waiting for
                // another sweeper (a locked account is skipped, the next one taken).
                let now = clock.now()
                let transitions = try await connection.preparedQuery(
                    """
                    SELECT account_id FROM account_states
                    WHERE next_transition_at <= \(now)
                    ORDER BY next_transition_at
                    LIMIT \(limit)
                    FOR UPDATE SKIP LOCKED
                    """
                )
                let transitionAccounts = try transitions.map { try $0.decode(String.self, at: 0) }
                let periods = try await connection.preparedQuery(
                    """
                    SELECT s.account_id FROM account_states AS s
                    WHERE s.account_id IN (
                        SELECT account_id FROM usage_periods WHERE closed_revision = 0 AND period_end <= \(now)
                        ORDER BY period_end LIMIT \(limit))
                      AND s.account_id <> ALL(\(transitionAccounts)::text[])
                    FOR UPDATE SKIP LOCKED
                    """
                )
                let due = transitionAccounts + (try periods.map { try $0.decode(String.self, at: 0) })
                dueAccounts = due
                return try await resolve(accounts: dueAccounts, newReports: [:], origin: .sweeper, on: connection)
            }
        } catch {
            guard !Self.isRetryable(error), !dueAccounts.isEmpty else { throw error }
            // One account that cannot be resolved must not stop the sweep for everyone: retry
            // one by one, and push a failing account's next attempt a minute later.
            var total = Outcome()
            for accountID in dueAccounts {
                do {
                    total = total + (try await pool.withTransaction { connection in
                        try await resolve(accounts: [accountID], newReports: [:], origin: .sweeper, on: connection)
                    })
                } catch where !Self.isRetryable(error) {
                    total.accountsFailed += 1
                    logger.error("expiry sweep could not resolve an account; retrying in a minute",
                                 metadata: ["account": "\(accountID)", "error": "\(error)"])
                    try await pool.preparedQuery(
                        """
                        UPDATE account_states SET next_transition_at = \(clock.now().addingTimeInterval(60))
                        WHERE account_id = \(accountID)
                        """
                    )
                }
            }
            return total
        }
    }

    /// Pending reports claimed for resolution, by account.
    struct Claimed {
        var reports: [String: [Report]] = [:]
        var keys: (accounts: [String], reportIDs: [String]) = ([], [])
    }

    func claim(limit: Int, onlyAccount: String?, on connection: Connection) async throws -> Claimed {
        let rows: QueryResult
        if let onlyAccount {
            rows = try await connection.preparedQuery(
                """
                SELECT account_id, \(unescaped: Report.columns) FROM reports
                WHERE status = 'pending' AND account_id = \(onlyAccount)
                ORDER BY arrival LIMIT \(limit)
                FOR UPDATE SKIP LOCKED
                """
            )
        } else {
            rows = try await connection.preparedQuery(
                """
                SELECT account_id, \(unescaped: Report.columns) FROM reports
                WHERE status = 'pending'
                ORDER BY arrival LIMIT \(limit)
                FOR UPDATE SKIP LOCKED
                """
            )
        }
        var claimed = Claimed()
        for row in rows {
            let accountID = try row.decode(String.self, at: 0)
            let report = try Report(row: row, offset: 1)
            claimed.reports[accountID, default: []].append(report)
            claimed.keys.accounts.append(accountID)
            claimed.keys.reportIDs.append(report.reportID)
        }
        return claimed
    }

    func resolveClaimed(_ claimed: Claimed, on connection: Connection) async throws -> Outcome {
        guard !claimed.keys.accounts.isEmpty else { return Outcome() }
        let outcome = try await resolve(accounts: Array(claimed.reports.keys), newReports: claimed.reports, origin: .worker, on: connection)
        try await connection.preparedQuery(
            """
            UPDATE reports AS r SET status = 'resolved', resolved_at = now(), attempts = r.attempts + 1, last_error = NULL
            FROM unnest(\(claimed.keys.accounts)::text[], \(claimed.keys.reportIDs)::text[]) AS k(a, id)
            WHERE r.account_id = k.a AND r.report_id = k.id
            """
        )
        return outcome
    }

    /// The slow path after a failed batch: the same accounts again, one transaction each.
    private func resolveAccountsSeparately(_ accounts: [String], limit: Int, maximumAttempts: Int) async throws -> Outcome {
        var total = Outcome()
        for accountID in accounts {
            var claimedIDs: [String] = []
            do {
                total = total + (try await pool.withTransaction { connection in
                    let claimed = try await claim(limit: limit, onlyAccount: accountID, on: connection)
                    claimedIDs = claimed.keys.reportIDs
                    return try await resolveClaimed(claimed, on: connection)
                })
            } catch where !Self.isRetryable(error) && !claimedIDs.isEmpty {
                total.accountsFailed += 1
                try await recordFailure(accountID: accountID, reportIDs: claimedIDs, error: error, maximumAttempts: maximumAttempts)
            }
        }
        return total
    }

    /// Counts a failed attempt on an account's pending reports; quarantines them at the limit.
    private func recordFailure(accountID: String, reportIDs: [String], error: any Error, maximumAttempts: Int) async throws {
        // `description` of our errors is log-safe (no DETAIL, no secrets).
        let message = String(describing: error).prefix(1000)
        let result = try await pool.preparedQuery(
            """
            UPDATE reports SET
                attempts = attempts + 1,
                last_error = \(String(message)),
                status = CASE WHEN attempts + 1 >= \(maximumAttempts) THEN 'quarantined' ELSE 'pending' END
            WHERE account_id = \(accountID) AND report_id = ANY(\(reportIDs)::text[]) AND status = 'pending'
            RETURNING status
            """
        )
        let quarantined = try result.filter { try $0.decode(String.self, at: 0) == "quarantined" }.count
        logger.error(
            "could not resolve an account's reports",
            metadata: ["account": "\(accountID)", "error": "\(message)", "quarantined": "\(quarantined)"]
        )
    }
}
