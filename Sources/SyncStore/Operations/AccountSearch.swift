import Foundation
import Postgres

/// The operator console's search: finds the accounts a support question is about from what the
/// person asking has at hand — an account id, a store transaction id (original or not), or the
/// `appAccountToken` the app set on a purchase. Every lookup is by an indexed key.
public struct AccountSearch: Sendable {
    let pool: ConnectionPool

    public init(pool: ConnectionPool) {
        self.pool = pool
    }

    /// One account found, with every way the query named it.
    public struct Match: Sendable, Codable, Equatable {
        public var accountID: String
        /// `account_id`, `original_transaction_id`, `transaction_id`, `app_account_token`.
        public var matchedBy: [String]
        /// The resolved tier; nil when the account has reports but no resolution yet.
        public var tier: String?
        public var resolvedAt: Date?

        enum CodingKeys: String, CodingKey {
            case accountID = "account_id"
            case matchedBy = "matched_by"
            case tier
            case resolvedAt = "resolved_at"
        }
    }

    /// Accounts named by `query` (trimmed), in account id order, at most `limit`.
    public func find(_ query: String, limit: Int = 50) async throws -> [Match] {
        let text = query.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { return [] }
        // Only a UUID can be an appAccountToken; the column is uuid, so no cast of free text.
        let token = UUID(uuidString: text)
        let rows = try await pool.preparedQuery(
            """
            WITH found (account_id, matched_by) AS (
                SELECT account_id, 'account_id' FROM account_states WHERE account_id = \(text)
                UNION ALL
                (SELECT account_id, 'account_id' FROM reports WHERE account_id = \(text) LIMIT 1)
                UNION ALL
                SELECT account_id, 'original_transaction_id' FROM transactions WHERE original_transaction_id = \(text)
                UNION ALL
                SELECT account_id, 'original_transaction_id' FROM transaction_owners WHERE original_transaction_id = \(text)
                UNION ALL
                SELECT account_id, 'transaction_id' FROM transactions WHERE transaction_id = \(text)
                UNION ALL
                SELECT account_id, 'app_account_token' FROM app_account_tokens WHERE app_account_token = \(token)::uuid
            )
            SELECT f.account_id, to_json(array_agg(DISTINCT f.matched_by ORDER BY f.matched_by))::text, s.tier, s.resolved_at
            FROM found f LEFT JOIN account_states s ON s.account_id = f.account_id
            GROUP BY f.account_id, s.tier, s.resolved_at
            ORDER BY f.account_id
            LIMIT \(limit)
            """
        )
        return try rows.map { row in
            Match(
                accountID: try row.decode(String.self, at: 0), matchedBy: try row.decode(JSONColumn<[String]>.self, at: 1).value,
                tier: try row.decode(String?.self, at: 2), resolvedAt: try row.decode(Date?.self, at: 3))
        }
    }
}
