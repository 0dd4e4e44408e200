import Foundation
import Postgres
import SyncCore

/// Binds store purchases to accounts and stores verified reports under that binding
/// (docs/STOREKIT.md, "Account binding").
///
/// A purchase (an original transaction) belongs to the account whose verified report first
/// named it; an `appAccountToken` names the account whose verified report first carried it.
/// A verified report of a purchase or token that another account already has is a conflict,
/// handled by the ``BindingPolicy``:
/// - ``BindingPolicy/reject``: ``BindingConflict`` is thrown and nothing is stored;
/// - ``BindingPolicy/transfer``: the purchase moves, with every report of it, to the reporting
///   account; both accounts are re-resolved and get an `entitlement.transferred` event, all in
///   the same transaction as the new reports.
public struct TransactionBinder: Sendable {
    /// The database, for callers that bind inside their own transaction.
    public let pool: ConnectionPool
    let engine: ResolutionEngine
    /// What to do with a conflict.
    public let policy: BindingPolicy

    public init(pool: ConnectionPool, engine: ResolutionEngine, policy: BindingPolicy) {
        self.pool = pool
        self.engine = engine
        self.policy = policy
    }

    /// What a submission stored and moved.
    public struct Outcome: Sendable, Equatable {
        public var submission: ReportInbox.Submission
        /// The purchases moved to this account (only under ``BindingPolicy/transfer``).
        public var transfers: [Transfer]
    }

    /// Binds `claims` to `accountID` and stores `reports` (validated, maybe some unverified) in one
    /// transaction; `device`, when given, is recorded as seen. Reports are idempotent on their id
    /// as in ``ReportInbox/submit(accountID:device:reports:)``, and the workers are woken.
    /// - Throws: ``BindingConflict`` under ``BindingPolicy/reject``.
    public func submit(
        accountID: String, device: DeviceInfo?, reports: [Report], claims: [PurchaseClaim], seenAt: Date? = nil
    ) async throws -> Outcome {
        try await pool.withTransaction { connection in
            try await submit(accountID: accountID, device: device, reports: reports, claims: claims, seenAt: seenAt, on: connection)
        }
    }

    /// ``submit(accountID:device:reports:claims:)`` inside the caller's transaction (a store
    /// notification records itself in the same one). A ``BindingConflict`` is thrown before any
    /// statement fails, so the transaction stays usable.
    public func submit(
        accountID: String, device: DeviceInfo?, reports: [Report], claims: [PurchaseClaim], seenAt: Date? = nil, on connection: Connection
    ) async throws -> Outcome {
        let (transfers, newlyBound) = try await bind(claims, to: accountID, on: connection)
        let inbox = ReportInbox(pool: pool)
        // What the store said of these purchases before any account had them.
        let kept = try await AppStoreNotificationStore(pool: pool).takeUnmatched(purchases: newlyBound, for: accountID, on: connection)
        if !kept.isEmpty {
            _ = try await inbox.insert(accountID: accountID, reports: kept, on: connection)
            try await connection.notify(channel: ReportInbox.channel, payload: accountID)
        }
        if let device {
            return Outcome(submission: try await inbox.submit(accountID: accountID, device: device, reports: reports, seenAt: seenAt, on: connection), transfers: transfers)
        }
        let inserted = Set(try await inbox.insert(accountID: accountID, reports: reports, on: connection))
        if !inserted.isEmpty { try await connection.notify(channel: ReportInbox.channel, payload: accountID) }
        return Outcome(submission: ReportInbox.Submission(reportIDs: reports.map(\.reportID), inserted: inserted), transfers: transfers)
    }

    /// The account that a store notification about `claim` belongs to: the owner of its purchase
    /// first (the account whose verified report bound it), else the account its token is bound
    /// to (tokens bind only to the account they belong to), else an account whose id *is* the
    /// token (apps that use their account UUID as the token); `nil` when none is known.
    public func account(for claim: PurchaseClaim) async throws -> String? {
        try await pool.withConnection { try await account(for: claim, on: $0) }
    }

    /// ``account(for:)`` on the caller's connection (inside its transaction).
    public func account(for claim: PurchaseClaim, on connection: Connection) async throws -> String? {
        let owners = try await connection.preparedQuery(
            "SELECT account_id FROM transaction_owners WHERE original_transaction_id = \(claim.originalTransactionID)"
        )
        if let owner = owners.first { return try owner.decode(String.self, at: 0) }
        guard let token = claim.appAccountToken else { return nil }
        let rows = try await connection.preparedQuery(
            """
            SELECT account_id FROM app_account_tokens WHERE app_account_token = \(token.uuidString.lowercased())::uuid
            UNION ALL
            SELECT account_id FROM account_states WHERE account_id = \(token.uuidString.lowercased())
            LIMIT 1
            """
        )
        return try rows.first?.decode(String.self, at: 0)
    }

    /// Takes, until the end of the caller's transaction, the lock that a first binding of these
    /// purchases takes too: a store notification that finds no account for a purchase keeps it
    /// as unmatched under this lock, so a device binding the purchase at that moment either comes
    /// first (and the notification finds its account) or after (and applies what it kept).
    /// `purchases` must be sorted, so that lockers queue in one order. `subsync_bind_claims`
    /// (sql/0024) takes the same lock, `hashtext('purchase:' || id)`: keep the two in step
    /// (TrustAPITests.notificationAndBindingShareThePurchaseLock).
    public func lockPurchases(_ purchases: [String], on connection: Connection) async throws {
        guard !purchases.isEmpty else { return }
        // unnest keeps the array's (sorted) order, so the locks are taken in that order.
        try await connection.preparedQuery(
            "SELECT pg_advisory_xact_lock(hashtext('purchase:' || id)) FROM unnest(\(purchases)::text[]) AS id"
        )
    }

    // MARK: - Binding

    /// Binds new purchases and tokens to `accountID`, finds conflicts and applies the policy.
    /// Returns the transfers made and the purchases bound for the first time.
    private func bind(
        _ claims: [PurchaseClaim], to accountID: String, on connection: Connection
    ) async throws -> (transfers: [Transfer], newlyBound: [String]) {
        guard !claims.isEmpty else { return ([], []) }
        // Sorted, so concurrent binders take the row locks in the same order.
        let purchases = Array(Set(claims.map(\.originalTransactionID))).sorted()
        let tokens = Array(Set(claims.compactMap { $0.appAccountToken?.uuidString.lowercased() })).sorted()

        // One statement (sql/0024): the purchases' advisory locks (the lock of ``lockPurchases``),
        // then insert-then-lock of the owners, so a concurrent first binding of the same purchase
        // waits for the other transaction and then sees its row; then the tokens likewise.
        var newlyBound: [String] = []
        var owners: [String: String] = [:]
        var tokenAccounts: [String: String] = [:]
        for row in try await connection.preparedQuery(
            """
            SELECT claim_kind, claim_key, owner_account_id, newly_bound
            FROM subsync_bind_claims(\(accountID), \(purchases)::text[], \(tokens)::text[]::uuid[])
            """
        ) {
            let key = try row.decode(String.self, at: 1)
            let owner = try row.decode(String.self, at: 2)
            if try row.decode(String.self, at: 0) == "token" {
                tokenAccounts[key] = owner
            } else {
                owners[key] = owner
                if try row.decode(Bool.self, at: 3) { newlyBound.append(key) }
            }
        }

        var conflicts: [BindingConflict] = []
        // One conflict per purchase: a sync may carry several of its transactions (renewals, the
        // same pack sent twice), and each conflict is a transfer with its events.
        var seen: Set<String> = []
        for claim in claims.sorted(by: { $0.originalTransactionID < $1.originalTransactionID })
        where seen.insert(claim.originalTransactionID).inserted {
            if let owner = owners[claim.originalTransactionID], owner != accountID {
                conflicts.append(BindingConflict(originalTransactionID: claim.originalTransactionID, ownerAccountID: owner, reason: .purchase))
            } else if let token = claim.appAccountToken?.uuidString.lowercased(), let named = tokenAccounts[token], named != accountID {
                conflicts.append(BindingConflict(originalTransactionID: claim.originalTransactionID, ownerAccountID: named, reason: .appAccountToken))
            }
        }
        guard !conflicts.isEmpty else { return ([], newlyBound) }
        switch policy {
        case .reject:
            throw conflicts[0]
        case .transfer:
            return (try await transfer(conflicts, claims: claims, to: accountID, on: connection), newlyBound)
        }
    }

    /// Moves the conflicting purchases (and rebinds their tokens) to `accountID`.
    private func transfer(
        _ conflicts: [BindingConflict], claims: [PurchaseClaim], to accountID: String, on connection: Connection
    ) async throws -> [Transfer] {
        let moved = Set(conflicts.map(\.originalTransactionID))
        let movedTokens = Array(Set(claims.filter { moved.contains($0.originalTransactionID) }
            .compactMap { $0.appAccountToken?.uuidString.lowercased() })).sorted()
        try await connection.preparedQuery(
            """
            UPDATE transaction_owners SET account_id = \(accountID), transferred_from = account_id, transferred_at = now()
            WHERE original_transaction_id = ANY(\(Array(moved))::text[]) AND account_id <> \(accountID)
            """
        )
        if !movedTokens.isEmpty {
            try await connection.preparedQuery(
                """
                UPDATE app_account_tokens SET account_id = \(accountID), bound_at = now()
                WHERE app_account_token = ANY(\(movedTokens)::text[]::uuid[]) AND account_id <> \(accountID)
                """
            )
        }

        // Move the reports first (this waits for a worker that has them claimed), then lock the
        // accounts. Workers take the other order (the accounts' locks, then their pending reports
        // in the claim), so a transfer and a batch can deadlock on the same account; PostgreSQL
        // detects it and fails one of them, which is retried whole: the batch by its worker, the
        // sync answered 503 with Retry-After (contention, ErrorMiddleware).
        var transfers: [Transfer] = []
        var movedReports: [Report] = []
        for conflict in conflicts {
            let from = conflict.ownerAccountID
            // A report whose id (or, verified, whose facts) the account already has is the same
            // report sent twice (a device that switched accounts): the account's copy stays, the
            // other goes.
            try await connection.preparedQuery(
                """
                DELETE FROM reports AS r
                WHERE r.account_id = \(from) AND r.original_transaction_id = \(conflict.originalTransactionID)
                  AND EXISTS (
                      SELECT 1 FROM reports AS mine WHERE mine.account_id = \(accountID)
                        AND (mine.report_id = r.report_id OR (r.fact_digest IS NOT NULL AND mine.fact_digest = r.fact_digest)))
                """
            )
            let rows = try await connection.preparedQuery(
                """
                UPDATE reports SET account_id = \(accountID)
                WHERE account_id = \(from) AND original_transaction_id = \(conflict.originalTransactionID)
                RETURNING status, \(unescaped: Report.columns)
                """
            )
            for row in rows where try row.decode(String.self, at: 0) != "quarantined" {
                movedReports.append(try Report(row: row, offset: 1))
            }
            transfers.append(Transfer(originalTransactionID: conflict.originalTransactionID, fromAccountID: from, toAccountID: accountID))
        }

        let accounts = Array(Set(transfers.map(\.fromAccountID) + [accountID])).sorted()
        let locked = try await AccountLocks.lockStates(of: accounts, catalogue: engine.catalogue, now: engine.clock.now(), on: connection)
        // The transfer events come first, with the snapshot each account had; what the move
        // changes follows as the resolution's own events.
        var sequences = locked.mapValues(\.lastSequence)
        var events: [Event] = []
        let now = engine.clock.now()
        for transfer in transfers {
            let entitlementID = movedReports.lazy
                .first { $0.originalTransactionID == transfer.originalTransactionID }
                .flatMap { engine.catalogue.products[$0.productID]?.entitlementID }
            for side in [transfer.fromAccountID, accountID] {
                let sequence = (sequences[side] ?? 0) + 1
                sequences[side] = sequence
                let state = locked[side]?.state ?? Resolver.resolve(transactions: [], catalogue: engine.catalogue, now: now)
                events.append(Event(
                    id: RandomUUID.lowercaseString(), accountID: side, sequence: sequence, type: .transferred,
                    occurredAt: now, entitlementID: entitlementID,
                    previous: entitlementID.flatMap { id in state.entitlements.first { $0.id == id } }, current: nil,
                    previousTier: nil, state: state, transfer: transfer))
            }
            // A consumable's units go with it: the old account is debited what the purchase still
            // gives it (docs/USAGE.md): its credits (a purchase that came back is credited again),
            // less its refunds, plus their reversals, less earlier transfers away. Before its
            // transactions go, so one purchase is never credited twice, and a refunded pack is not
            // taken back a second time. A second transfer away gets an id of its own.
            let stamp = now.microsecondsSince1970
            let debited = try await connection.preparedQuery(
                """
                INSERT INTO usage_entries (account_id, meter, entry_id, kind, units, at, reason)
                SELECT n.account_id, n.meter,
                       'credit_transferred:' || n.transaction_id || CASE WHEN n.away = 0 THEN '' ELSE '#' || \(stamp)::text END,
                       'credit_revoked', n.units, \(now), 'transferred to ' || \(accountID)
                FROM (
                    SELECT u.account_id, u.meter, t.transaction_id,
                           sum(CASE WHEN u.kind IN ('credit', 'credit_restored') THEN u.units ELSE -u.units END) AS units,
                           count(*) FILTER (WHERE starts_with(u.entry_id, 'credit_transferred:')) AS away
                    FROM transactions AS t
                    JOIN usage_entries AS u ON u.account_id = t.account_id AND u.kind IN ('credit', 'credit_revoked', 'credit_restored')
                     AND (u.entry_id IN ('credit:' || t.transaction_id, 'credit_revoked:' || t.transaction_id,
                                         'credit_transferred:' || t.transaction_id)
                          OR starts_with(u.entry_id, 'credit:' || t.transaction_id || '#')
                          OR starts_with(u.entry_id, 'credit_revoked:' || t.transaction_id || '#')
                          OR starts_with(u.entry_id, 'credit_restored:' || t.transaction_id || '#')
                          OR starts_with(u.entry_id, 'credit_transferred:' || t.transaction_id || '#'))
                    WHERE t.account_id = \(transfer.fromAccountID) AND t.original_transaction_id = \(transfer.originalTransactionID)
                    GROUP BY u.account_id, u.meter, t.transaction_id
                ) AS n
                WHERE n.units > 0
                ON CONFLICT (account_id, meter, entry_id) DO NOTHING
                RETURNING meter, entry_id, units
                """
            )
            // The debits count in the old account's stored period totals (UsageTotals).
            try await UsageTotals.add(
                try debited.map { row in
                    (transfer.fromAccountID, UsageEntry(
                        id: try row.decode(String.self, at: 1), meter: try row.decode(String.self, at: 0), kind: .creditRevoked,
                        units: Int(try row.decode(Int64.self, at: 2)), at: now))
                }, on: connection)
            try await connection.preparedQuery(
                """
                DELETE FROM transactions
                WHERE account_id = \(transfer.fromAccountID) AND original_transaction_id = \(transfer.originalTransactionID)
                """
            )
        }
        try await Outbox.write(events, origin: .transfer, on: connection)
        try await connection.preparedQuery(
            """
            UPDATE account_states AS s SET last_sequence = v.sequence
            FROM unnest(\(Array(sequences.keys))::text[], \(Array(sequences.values))::bigint[]) AS v(account_id, sequence)
            WHERE s.account_id = v.account_id
            """
        )
        try await engine.resolve(accounts: accounts, newReports: [accountID: movedReports], origin: .transfer, on: connection)
        return transfers
    }
}

/// What a verified report claims for its account: its purchase and the app's token on it.
public struct PurchaseClaim: Sendable, Hashable {
    /// The store's original transaction id.
    public var originalTransactionID: String
    /// The `appAccountToken` the app set on the purchase, if any.
    public var appAccountToken: UUID?

    public init(originalTransactionID: String, appAccountToken: UUID?) {
        self.originalTransactionID = originalTransactionID
        self.appAccountToken = appAccountToken
    }
}

/// What to do when a verified report names a purchase or token bound to another account.
public enum BindingPolicy: String, Sendable, CaseIterable {
    /// Refuse the report (HTTP 409); nothing is stored.
    case reject
    /// Move the purchase to the reporting account.
    case transfer
}

/// A purchase or token already bound to another account, under ``BindingPolicy/reject``.
public struct BindingConflict: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Reason: String, Sendable {
        /// The purchase belongs to another account.
        case purchase
        /// The purchase's `appAccountToken` names another account.
        case appAccountToken = "app_account_token"
    }

    public var originalTransactionID: String
    /// The other account: for logs and operators, never shown to a device.
    public var ownerAccountID: String
    public var reason: Reason

    public var description: String {
        "original transaction \(originalTransactionID) is bound to another account (by \(reason.rawValue))"
    }
}
