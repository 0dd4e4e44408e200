import Foundation
import Postgres
import SyncCore

/// `subsync prune`: deletes old resolved reports (history retention) without changing what
/// `subsync reconcile` recomputes.
///
/// **The rule.** Every field of a transaction's aggregate is a join over its reports: a maximum
/// (latest expiry, latest grace end, the store's and the operator's latest reinstatement, latest
/// observation, each source's revocation latest by (time, report key), the representative greatest by its order key, the renewal
/// details greatest by theirs), a minimum (first observation) or an "or" (upgraded). For each
/// such field one report attains the value: its *witness*. The join of any set of reports that
/// contains every witness equals the join of all of them, so deleting anything but the
/// witnesses (at most eleven reports per transaction)
/// leaves every aggregate, hence every resolved state, exactly as recomputed before. New reports
/// arriving meanwhile only join on top (the join is monotone), and each batch holds the workers'
/// account locks, so concurrent workers and reconciliation see either the old or the new set.
/// Pending and quarantined reports are never pruned (they are not joined yet).
///
/// Witness reports older than the cutoff are *kept* and counted; `force` deletes them too, after
/// which the stored aggregates are the only record of those facts and `reconcile` reports (and,
/// without `--dry-run`, "repairs" towards) the thinner history.
public struct Pruner: Sendable {
    let pool: ConnectionPool

    public init(pool: ConnectionPool) {
        self.pool = pool
    }

    /// What a prune did (or, dry, would do).
    public struct Summary: Sendable, Codable, Equatable {
        public var cutoff: Date
        public var dryRun: Bool
        public var force: Bool
        /// Resolved reports received before the cutoff.
        public var eligible = 0
        /// Reports deleted (or that would be).
        public var deleted = 0
        /// Eligible reports kept because the current state depends on them (0 with `force`).
        public var kept = 0
        /// Transactions for which reports were kept.
        public var transactionsKept = 0
        public var accounts = 0

        public init(cutoff: Date, dryRun: Bool, force: Bool) {
            self.cutoff = cutoff
            self.dryRun = dryRun
            self.force = force
        }

        enum CodingKeys: String, CodingKey {
            case cutoff
            case dryRun = "dry_run"
            case force, eligible, deleted, kept
            case transactionsKept = "transactions_kept"
            case accounts
        }
    }

    /// Prunes resolved reports received before `cutoff`, `batchSize` accounts per transaction.
    public func prune(before cutoff: Date, force: Bool, dryRun: Bool, batchSize: Int = 500) async throws -> Summary {
        var summary = Summary(cutoff: cutoff, dryRun: dryRun, force: force)
        var cursor = ""
        while true {
            let accounts = try await pool.preparedQuery(
                """
                SELECT DISTINCT account_id FROM reports
                WHERE account_id > \(cursor) AND status = 'resolved' AND received_at < \(cutoff)
                ORDER BY account_id LIMIT \(batchSize)
                """
            ).map { try $0.decode(String.self, at: 0) }
            guard let last = accounts.last else { break }
            cursor = last
            try await pool.withTransaction { connection in
                // The workers' locks, in their order: no report of these accounts is joined meanwhile.
                _ = try await AccountLocks.lockExisting(accounts.sorted(), skipLocked: false, on: connection)
                let rows = try await connection.preparedQuery(
                    """
                    SELECT account_id, received_at < \(cutoff), \(unescaped: Report.columns) FROM reports
                    WHERE account_id = ANY(\(accounts)::text[]) AND status = 'resolved'
                    """
                )
                var groups: [String: [(report: Report, old: Bool)]] = [:]
                for row in rows {
                    let accountID = try row.decode(String.self, at: 0)
                    let report = try Report(row: row, offset: 2)
                    groups[accountID + "\u{0}" + report.transactionID, default: []].append((report, try row.decode(Bool.self, at: 1)))
                }
                var deleteAccounts: [String] = []
                var deleteIDs: [String] = []
                for (key, group) in groups {
                    let accountID = String(key.prefix { $0 != "\u{0}" })
                    let needed = force ? [] : Self.witnesses(of: group.map(\.report))
                    var keptHere = 0
                    for (report, old) in group where old {
                        summary.eligible += 1
                        if needed.contains(report.reportID) {
                            keptHere += 1
                        } else {
                            deleteAccounts.append(accountID)
                            deleteIDs.append(report.reportID)
                        }
                    }
                    summary.kept += keptHere
                    if keptHere > 0 { summary.transactionsKept += 1 }
                }
                summary.deleted += deleteIDs.count
                summary.accounts += accounts.count
                guard !dryRun, !deleteIDs.isEmpty else { return }
                try await connection.preparedQuery(
                    """
                    DELETE FROM reports AS r USING unnest(\(deleteAccounts)::text[], \(deleteIDs)::text[]) AS k(a, id)
                    WHERE r.account_id = k.a AND r.report_id = k.id AND r.status = 'resolved'
                    """
                )
            }
        }
        return summary
    }

    /// The ids of the reports of one transaction that determine its aggregate: for each field,
    /// one report attaining the joined value (ties broken by the smallest report id, so two
    /// prunes choose alike). If the join of these did not equal the join of all (it always does;
    /// this guards the rule against future fields), every report is needed.
    public static func witnesses(of reports: [Report]) -> Set<String> {
        guard let aggregate = TransactionAggregate.aggregate(reports).first, reports.count > 1 else {
            return Set(reports.map(\.reportID))
        }
        let singles = reports.map { ($0.reportID, TransactionAggregate($0)) }
        var needed: Set<String> = [aggregate.representative.reportID]
        func keepFirst(where matches: (TransactionAggregate) -> Bool) {
            if let id = singles.filter({ matches($0.1) }).map(\.0).min() { needed.insert(id) }
        }
        for revocation in [aggregate.storeRevocation, aggregate.operatorRevocation] {
            if let revocation { needed.insert(revocation.sourceReport.reportID) }
        }
        if let renewal = aggregate.renewal { needed.insert(renewal.sourceReport.reportID) }
        if let expiry = aggregate.expiresAt { keepFirst { $0.expiresAt == expiry } }
        if let grace = aggregate.gracePeriodExpiresAt { keepFirst { $0.gracePeriodExpiresAt == grace } }
        if let reinstated = aggregate.storeReinstatedAt { keepFirst { $0.storeReinstatedAt == reinstated } }
        if let reinstated = aggregate.operatorReinstatedAt { keepFirst { $0.operatorReinstatedAt == reinstated } }
        if let lift = aggregate.operatorLiftsStoreBefore { keepFirst { $0.operatorLiftsStoreBefore == lift } }
        if aggregate.isUpgraded { keepFirst { $0.isUpgraded } }
        keepFirst { $0.firstObservedAt == aggregate.firstObservedAt }
        keepFirst { $0.lastObservedAt == aggregate.lastObservedAt }
        let kept = reports.filter { needed.contains($0.reportID) }
        guard TransactionAggregate.aggregate(kept) == [aggregate] else { return Set(reports.map(\.reportID)) }
        return needed
    }
}
