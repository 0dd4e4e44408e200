import Foundation
import Postgres

/// The questions asked of the App Store before an expiry (`store_expiry_checks`, sql/0039;
/// docs/STORE.md "Before an expiry"), and the hold that keeps an expiry from being applied while
/// its question is open.
public struct AppStoreExpiryChecks: Sendable {
    let pool: ConnectionPool

    public init(pool: ConnectionPool) {
        self.pool = pool
    }

    /// What became of a question: open (`asking`), to be asked again (`failed`), or the store's
    /// answer. Stored as its raw value.
    public enum Outcome: String, Sendable, Equatable {
        /// Claimed by a process that is asking now (or died asking: asked again later).
        case asking
        /// No answer (the store down, slow, or rate-limited): asked again after a while.
        case failed
        /// The store knew a renewal: a store report was written.
        case renewed
        /// The store knew a refund: a store report was written.
        case revoked
        /// The store agrees (or does not know the subscription): the expiry stands.
        case unchanged
        /// The account does not own the purchase: its answer is not the account's to take.
        case notOwned = "not_owned"

        /// Whether the store answered (every outcome but `asking` and `failed`).
        public var isAnswer: Bool { self != .asking && self != .failed }
    }

    /// An entitlement whose access ends now, from an auto-renewable subscription.
    public struct Candidate: Sendable, Equatable {
        public var accountID: String
        public var originalTransactionID: String
        public var productID: String
        /// When access ends (grace included), as stored.
        public var expiresAt: Date
    }

    /// Up to `limit` entitlements of `products` (the catalogue's auto-renewable ones) that give
    /// access and end at or before `now` but after `now - bound`, without an answer for that end
    /// and not asked in the last `retryAfter` seconds (a question being asked, `asking`, is open:
    /// a process that died asking leaves it to be asked again). Questions asked fewer times come
    /// first, then the oldest ends: one that keeps failing (a subscription the store answers too
    /// slowly) rotates behind the others instead of being asked first every time.
    public func due(products: [String], now: Date, bound: TimeInterval, retryAfter: TimeInterval, limit: Int) async throws -> [Candidate] {
        guard !products.isEmpty else { return [] }
        return try await pool.preparedQuery(
            """
            SELECT e.account_id, e.state->>'original_transaction_id', e.product_id, e.expires_at
            FROM entitlements e
            LEFT JOIN store_expiry_checks c
              ON c.account_id = e.account_id AND c.original_transaction_id = e.state->>'original_transaction_id'
             AND c.expires_at = e.expires_at
            WHERE e.status IN ('active', 'grace_period') AND e.product_id = ANY(\(products)::text[])
              AND e.expires_at <= \(now) AND e.expires_at > \(now.addingTimeInterval(-bound))
              AND e.state->>'original_transaction_id' IS NOT NULL
              AND (c.account_id IS NULL
                   OR (c.outcome IN ('failed', 'asking') AND c.asked_at <= \(now.addingTimeInterval(-retryAfter))))
            ORDER BY coalesce(c.attempts, 0), e.expires_at
            LIMIT \(Int64(limit))
            """
        ).map { row in
            Candidate(
                accountID: try row.decode(String.self, at: 0), originalTransactionID: try row.decode(String.self, at: 1),
                productID: try row.decode(String.self, at: 2), expiresAt: try row.decode(Date.self, at: 3))
        }
    }

    /// Claims the question about `candidate` for this process: `false` when another process
    /// asked (or is asking) it within `retryAfter`, or it has an answer. Every claim counts an
    /// attempt.
    public func claim(_ candidate: Candidate, now: Date, retryAfter: TimeInterval) async throws -> Bool {
        try await pool.preparedQuery(
            """
            INSERT INTO store_expiry_checks (account_id, original_transaction_id, expires_at, asked_at, outcome)
            VALUES (\(candidate.accountID), \(candidate.originalTransactionID), \(candidate.expiresAt), \(now), 'asking')
            ON CONFLICT (account_id, original_transaction_id, expires_at) DO UPDATE
            SET asked_at = EXCLUDED.asked_at, outcome = 'asking', attempts = store_expiry_checks.attempts + 1
            WHERE store_expiry_checks.outcome IN ('failed', 'asking') AND store_expiry_checks.asked_at <= \(now.addingTimeInterval(-retryAfter))
            RETURNING 1
            """
        ).count == 1
    }

    /// Records a claimed question's outcome: `failed` (asked again later), or what the store said.
    public func record(_ candidate: Candidate, outcome: Outcome) async throws {
        try await pool.preparedQuery(
            """
            UPDATE store_expiry_checks SET outcome = \(outcome.rawValue)
            WHERE account_id = \(candidate.accountID) AND original_transaction_id = \(candidate.originalTransactionID)
              AND expires_at = \(candidate.expiresAt)
            """
        )
    }

    /// Holds the expiry of the accounts (at most `limit`, the earliest ends first) with an
    /// entitlement of `products` that ends by `now` (a few seconds ahead, so what ends while the
    /// sweep runs is covered) but not before `now - bound`, without an answer: its next transition
    /// moves to `now + retryAfter` (never past the end plus `bound`), so the sweeper asks before
    /// applying it. One row per statement (in account order), so the hold never locks several
    /// accounts at once beside the workers.
    public func holdUnanswered(products: [String], now: Date, bound: TimeInterval, retryAfter: TimeInterval, limit: Int) async throws {
        guard !products.isEmpty else { return }
        let rows = try await pool.preparedQuery(
            """
            SELECT e.account_id, min(e.expires_at) AS ends FROM entitlements e
            WHERE e.status IN ('active', 'grace_period') AND e.product_id = ANY(\(products)::text[])
              AND e.expires_at <= \(now) AND e.expires_at > \(now.addingTimeInterval(-bound))
              AND NOT EXISTS (
                  SELECT 1 FROM store_expiry_checks c
                  WHERE c.account_id = e.account_id AND c.original_transaction_id = e.state->>'original_transaction_id'
                    AND c.expires_at = e.expires_at AND c.outcome NOT IN ('failed', 'asking'))
            GROUP BY e.account_id ORDER BY ends, e.account_id LIMIT \(Int64(limit))
            """
        )
        var holds: [(String, Date)] = []
        for row in rows {
            let ends = try row.decode(Date.self, at: 1)
            holds.append((try row.decode(String.self, at: 0), min(now.addingTimeInterval(retryAfter), ends.addingTimeInterval(bound))))
        }
        for (accountID, until) in holds.sorted(by: { $0.0 < $1.0 }) {
            try await hold(accountID, until: until, now: now)
        }
    }

    /// Ends the hold an answered question kept: the account's next transition comes back to the
    /// answered end (or stays earlier), so the sweep applies the expiry at once instead of at
    /// the hold's end. Only when nothing else holds the account: no other end of `products` due
    /// by `horizon` (and within `bound` of `now`) without an answer that lets it expire (not
    /// asked yet, being asked, failed, or renewed or revoked and waiting for the workers), and no
    /// report waiting in the inbox. Otherwise the hold runs out as it would have.
    public func lift(_ candidate: Candidate, products: [String], now: Date, horizon: Date, bound: TimeInterval) async throws {
        try await pool.preparedQuery(
            """
            UPDATE account_states SET next_transition_at = \(candidate.expiresAt)
            WHERE account_id = \(candidate.accountID) AND next_transition_at > \(candidate.expiresAt)
              AND NOT EXISTS (
                  SELECT 1 FROM entitlements e
                  LEFT JOIN store_expiry_checks c
                    ON c.account_id = e.account_id AND c.original_transaction_id = e.state->>'original_transaction_id'
                   AND c.expires_at = e.expires_at
                  WHERE e.account_id = \(candidate.accountID) AND e.status IN ('active', 'grace_period')
                    AND e.product_id = ANY(\(products)::text[])
                    AND e.expires_at <= \(horizon) AND e.expires_at > \(now.addingTimeInterval(-bound))
                    AND NOT (e.state->>'original_transaction_id' IS NOT DISTINCT FROM \(candidate.originalTransactionID)
                             AND e.expires_at = \(candidate.expiresAt))
                    AND (c.account_id IS NULL OR c.outcome NOT IN ('unchanged', 'not_owned')))
              AND NOT EXISTS (SELECT 1 FROM reports r WHERE r.account_id = \(candidate.accountID) AND r.status = 'pending')
            """
        )
    }

    /// Holds the expiry of `accountID` until `until` when it is due at `now` (a store report was
    /// just written for it: the workers resolve it, and their resolution sets the next
    /// transition anew).
    public func hold(_ accountID: String, until: Date, now: Date) async throws {
        try await pool.preparedQuery(
            """
            UPDATE account_states SET next_transition_at = \(until)
            WHERE account_id = \(accountID) AND next_transition_at <= \(now)
            """
        )
    }
}
