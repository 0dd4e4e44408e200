import Foundation
import Postgres

/// Per account, the moment before which its device tokens no longer count (sql/0041): what
/// `subsync tokens revoke` and the admin route write, what ``changes(since:)`` reads for the
/// authenticator's in-memory copy.
public struct TokenRevocations: Sendable {
    let pool: ConnectionPool

    public init(pool: ConnectionPool) {
        self.pool = pool
    }

    /// What changed since `since` (the database's clock, as the last call returned it; `nil`:
    /// everything), re-reading ``overlap`` before it: a revocation whose transaction committed
    /// after a later one was read is still found, unless it took longer than that. Returns the
    /// lines and the newest change seen, to pass next time.
    public func changes(since: Date?) async throws -> (lines: [String: Date], newest: Date?) {
        let rows: QueryResult
        if let since {
            rows = try await pool.preparedQuery(
                """
                SELECT account_id, revoked_before, changed_at FROM token_revocations
                WHERE changed_at >= \(since.addingTimeInterval(-Self.overlap))
                """)
        } else {
            rows = try await pool.preparedQuery("SELECT account_id, revoked_before, changed_at FROM token_revocations")
        }
        var lines: [String: Date] = [:]
        var newest = since
        for row in rows {
            lines[try row.decode(String.self, at: 0)] = try row.decode(Date.self, at: 1)
            let changed = try row.decode(Date.self, at: 2)
            if newest.map({ changed > $0 }) ?? true { newest = changed }
        }
        return (lines, newest)
    }

    /// How far before the last change seen ``changes(since:)`` reads again.
    public static let overlap: TimeInterval = 60

    /// A revocation as the command and the admin route answer it.
    public struct Revocation: Encodable, Sendable {
        public var accountID: String
        /// Tokens issued before this are refused (a later line already recorded stays).
        public var revokedBefore: Date
        public var actor: String
        public var audit: OperatorLog.Action

        enum CodingKeys: String, CodingKey {
            case accountID = "account_id"
            case revokedBefore = "revoked_before"
            case actor, audit
        }
    }

    /// How far past the moment of a revocation its line is drawn: issuers' clocks may run up to a
    /// minute fast (the leeway the authenticator gives `iat`), so a token issued just before
    /// the revocation could carry an `iat` after it. Tokens issued in that minute are refused too.
    public static let margin: TimeInterval = 60

    /// Revokes every token of `accountID` issued until now, by the database's clock (one clock
    /// for every process and operator machine), plus ``margin``; recorded as an operator action
    /// in the same transaction. Returns the line now in force (a later one already recorded
    /// stays) with the audit record.
    public func revoke(_ accountID: String, actor: String, reason: String?) async throws -> Revocation {
        try await pool.withTransaction { connection in
            let rows = try await connection.preparedQuery(
                """
                INSERT INTO token_revocations (account_id, revoked_before, revoked_at, actor, reason)
                VALUES (\(accountID), clock_timestamp() + make_interval(secs => \(Self.margin)), clock_timestamp(), \(actor), \(reason))
                ON CONFLICT (account_id) DO UPDATE SET
                    revoked_before = GREATEST(token_revocations.revoked_before, EXCLUDED.revoked_before),
                    revoked_at = EXCLUDED.revoked_at, actor = EXCLUDED.actor, reason = EXCLUDED.reason,
                    changed_at = clock_timestamp()
                RETURNING revoked_before, revoked_at
                """
            )
            let line = try rows[0].decode(Date.self, at: 0)
            let audit = try await OperatorLog.record(
                at: try rows[0].decode(Date.self, at: 1), actor: actor, action: "tokens_revoke", accountID: accountID, reason: reason,
                outcome: "device tokens issued before \(RFC3339.format(line)) refused", on: connection)
            return Revocation(accountID: accountID, revokedBefore: line, actor: actor, audit: audit)
        }
    }

    /// Takes back the revocation of `accountID` (one made by mistake, or one that locked out
    /// tokens without `iat`): its tokens count again by their expiry alone. `nil` when there was
    /// none. Recorded as an operator action.
    public func unrevoke(_ accountID: String, actor: String, reason: String?) async throws -> OperatorLog.Action? {
        try await pool.withTransaction { connection in
            // The line moves back to the epoch (rather than the row going) so that every
            // process's next read of what changed sees it.
            let rows = try await connection.preparedQuery(
                """
                UPDATE token_revocations SET revoked_before = 'epoch', revoked_at = clock_timestamp(), actor = \(actor),
                    reason = \(reason), changed_at = clock_timestamp()
                WHERE account_id = \(accountID) AND revoked_before > 'epoch'
                RETURNING revoked_at
                """
            )
            guard let row = rows.first else { return nil }
            return try await OperatorLog.record(
                at: try row.decode(Date.self, at: 0), actor: actor, action: "tokens_unrevoke", accountID: accountID, reason: reason,
                outcome: "the revocation of device tokens was taken back", on: connection)
        }
    }
}
