import Foundation
import Postgres

/// The audit log of operator actions (sql/0015): reconciling an account, retrying or cancelling
/// a delivery, retrying dead deliveries. Revoke and unrevoke are audited as admin reports
/// (``AdminOverride``) and are not written here.
public struct OperatorLog: Sendable {
    let pool: ConnectionPool

    public init(pool: ConnectionPool) {
        self.pool = pool
    }

    /// One recorded action.
    public struct Action: Sendable, Codable, Equatable {
        public var id: Int64
        public var at: Date
        public var actor: String
        /// `reconcile`, `reconcile_dry_run`, `delivery_retry`, `delivery_cancel`, `dead_deliveries_retry`.
        public var action: String
        public var accountID: String?
        /// The delivery or endpoint the action was about.
        public var target: String?
        public var reason: String?
        /// What it did, in words.
        public var outcome: String

        enum CodingKeys: String, CodingKey {
            case id, at, actor, action
            case accountID = "account_id"
            case target, reason, outcome
        }
    }

    /// Records an action and returns the stored record.
    public func record(
        at: Date, actor: String, action: String, accountID: String? = nil, target: String? = nil, reason: String? = nil,
        outcome: String
    ) async throws -> Action {
        try await pool.withConnection { connection in
            try await Self.record(
                at: at, actor: actor, action: action, accountID: accountID, target: target, reason: reason, outcome: outcome, on: connection)
        }
    }

    /// ``record(at:actor:action:accountID:target:reason:outcome:)`` on `connection`, inside the
    /// caller's transaction: the action and what it did commit together, or neither does.
    public static func record(
        at: Date, actor: String, action: String, accountID: String? = nil, target: String? = nil, reason: String? = nil,
        outcome: String, on connection: Connection
    ) async throws -> Action {
        let rows = try await connection.preparedQuery(
            """
            INSERT INTO operator_actions (at, actor, action, account_id, target, reason, outcome)
            VALUES (\(at), \(actor), \(action), \(accountID), \(target), \(reason), \(outcome))
            RETURNING id
            """
        )
        return Action(
            id: try rows[0].decode(Int64.self, at: 0), at: at, actor: actor, action: action, accountID: accountID,
            target: target, reason: reason, outcome: outcome)
    }

    /// The latest actions about `target` (such as `endpoint <id>`), oldest first.
    public func actions(onTarget target: String, limit: Int = 50) async throws -> [Action] {
        try await latest(where: "target", is: target, limit: limit)
    }

    public func actions(ofAccount accountID: String, limit: Int = 200) async throws -> [Action] {
        try await latest(where: "account_id", is: accountID, limit: limit)
    }

    /// The latest `limit` actions whose `column` (one of this type's, never input) is `value`,
    /// oldest first.
    private func latest(where column: String, is value: String, limit: Int) async throws -> [Action] {
        let rows = try await pool.preparedQuery(
            """
            SELECT id, at, actor, action, account_id, target, reason, outcome FROM (
                SELECT * FROM operator_actions WHERE \(unescaped: column) = \(value) ORDER BY at DESC, id DESC LIMIT \(limit)
            ) AS latest ORDER BY at, id
            """
        )
        return try rows.map(Self.action)
    }

    private static func action(_ row: Row) throws -> Action {
        Action(
            id: try row.decode(Int64.self, at: 0), at: try row.decode(Date.self, at: 1),
            actor: try row.decode(String.self, at: 2), action: try row.decode(String.self, at: 3),
            accountID: try row.decode(String?.self, at: 4), target: try row.decode(String?.self, at: 5),
            reason: try row.decode(String?.self, at: 6), outcome: try row.decode(String.self, at: 7))
    }
}
