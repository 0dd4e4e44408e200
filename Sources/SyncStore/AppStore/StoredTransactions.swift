import Foundation
import Postgres
import SyncCore

/// The transactions an account has as stored (`transactions.aggregate`): what reconcile against
/// the store compares with the store's answer (docs/STORE.md).
public enum StoredTransactions {
    /// Every stored transaction aggregate of `accountID`.
    public static func of(_ accountID: String, pool: ConnectionPool) async throws -> [TransactionAggregate] {
        try await pool.withConnection { connection in
            try await UsageLedger.transactionLedgers(of: [accountID], on: connection)[accountID]?.unorderedAggregates ?? []
        }
    }

    /// Which of `originals` are bound to `accountID` (`transaction_owners`): the purchases the
    /// account owns, not only ones it has reports of.
    public static func owned(_ originals: Set<String>, by accountID: String, pool: ConnectionPool) async throws -> Set<String> {
        guard !originals.isEmpty else { return [] }
        return Set(try await pool.preparedQuery(
            """
            SELECT original_transaction_id FROM transaction_owners
            WHERE original_transaction_id = ANY(\(originals.sorted())::text[]) AND account_id = \(accountID)
            """
        ).map { try $0.decode(String.self, at: 0) })
    }

    /// Accounts that have transactions, in id order, after `after` (a page of `limit`).
    public static func accounts(after: String, limit: Int, pool: ConnectionPool) async throws -> [String] {
        try await pool.preparedQuery(
            """
            SELECT DISTINCT account_id FROM transactions WHERE account_id > \(after) ORDER BY account_id LIMIT \(Int64(limit))
            """
        ).map { try $0.decode(String.self, at: 0) }
    }
}
