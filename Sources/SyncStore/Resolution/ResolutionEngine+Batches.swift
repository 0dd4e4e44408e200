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
        do {
            return try await pool.withTransaction { connection in
                let claimed = try await claim(limit: limit, onlyAccount: nil, on: connection)
                return try await resolveClaimed(claimed, on: connection)
            }
        } catch let error as PostgresError where error.isConnectionLoss || error.sqlState?.isTransient == true {
            throw error
        } catch {
            logger.warning("batch failed; retrying its accounts one by one", metadata: ["error": "\(error)"])
            return try await resolveAccountsSeparately(limit: limit, maximumAttempts: maximumAttempts, firstError: error)
        }
    }

    /// Resolves the accounts whose state changes with time alone (`next_transition_at` due), at
    /// most `limit` of them, skipping accounts another process is resolving right now.
    public func resolveDueAccounts(limit: Int) async throws -> Outcome {
        try await pool.withTransaction { connection in
            let due = try await connection.preparedQuery(
                """
                SELECT account_id FROM account_states
                WHERE next_transition_at <= \(clock())
                ORDER BY next_transition_at
                LIMIT \(limit)
                FOR UPDATE SKIP LOCKED
                """
            )
            let accounts = try due.map { try $0.decode(String.self, at: 0) }
            return try await resolve(accounts: accounts, newReports: [:], origin: .sweeper, on: connection)
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

    /// The slow path after a failed batch: one transaction per account.
    private func resolveAccountsSeparately(limit: Int, maximumAttempts: Int, firstError: any Error) async throws -> Outcome {
        let rows = try await pool.preparedQuery(
            """
            SELECT DISTINCT account_id FROM (
                SELECT account_id FROM reports WHERE status = 'pending' ORDER BY arrival LIMIT \(limit)
            ) AS pending
            """
        )
        var total = Outcome()
        for row in rows {
            let accountID = try row.decode(String.self, at: 0)
            do {
                total = total + (try await pool.withTransaction { connection in
                    let claimed = try await claim(limit: limit, onlyAccount: accountID, on: connection)
                    return try await resolveClaimed(claimed, on: connection)
                })
            } catch let error as PostgresError where error.isConnectionLoss {
                throw error
            } catch {
                total.accountsFailed += 1
                try await recordFailure(accountID: accountID, error: error, maximumAttempts: maximumAttempts)
            }
        }
        return total
    }

    /// Counts a failed attempt on an account's pending reports; quarantines them at the limit.
    private func recordFailure(accountID: String, error: any Error, maximumAttempts: Int) async throws {
        // `description` of our errors is log-safe (no DETAIL, no secrets).
        let message = String(describing: error).prefix(1000)
        let result = try await pool.preparedQuery(
            """
            UPDATE reports SET
                attempts = attempts + 1,
                last_error = \(String(message)),
                status = CASE WHEN attempts + 1 >= \(maximumAttempts) THEN 'quarantined' ELSE 'pending' END
            WHERE account_id = \(accountID) AND status = 'pending'
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
