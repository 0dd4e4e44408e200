import Foundation
import Postgres
import SyncCore

/// Every lock on an account's `account_states` row. Whoever writes an account's state, events,
/// ledger or holds takes its row lock here first, always in sorted order, so that workers,
/// sweepers, binders, usage writers and operators serialise on the same row and cannot deadlock.
enum AccountLocks {
    /// An account's stored state, read under its lock.
    struct LockedState {
        var state: AccountState
        var lastSequence: Int64
        /// `nil` for a placeholder that was never resolved.
        var resolvedAt: Date?
        /// The account has no row yet: it is reserved under its advisory lock (sql/0025), and
        /// its first resolved state is inserted rather than written over a placeholder.
        var isReserved = false
    }

    /// Locks the `account_states` rows of `accountIDs` in sorted order, creating placeholders for
    /// missing ones (one at a time in that order too, so concurrent inserts cannot deadlock). A placeholder's
    /// `resolved_at` is -infinity: it has never been resolved; its state is the catalogue's base
    /// state at `now`.
    ///
    /// With `skipLocked`, accounts another transaction holds, or is creating, are left out of the
    /// result instead of waited for (sql/0023: creators take an advisory lock on the account
    /// first, which this only tries).
    static func lockStates(
        of accountIDs: [String], catalogue: Catalogue, now: Date, skipLocked: Bool = false, on connection: Connection
    ) async throws -> [String: LockedState] {
        let sorted = Array(Set(accountIDs)).sorted()
        let baseState = Resolver.resolve(transactions: [], catalogue: catalogue, now: now)
        return try await lock(sorted, skipLocked: skipLocked, placeholder: baseState, on: connection)
    }

    /// Locks the `account_states` rows of `sortedAccountIDs` that exist, in that order, through
    /// `subsync_lock_account_states` (sql/0014, 0022, 0023, 0032): one statement per account, which Citus routes to one
    /// shard, where a multi-account `FOR UPDATE` is refused. With `skipLocked`, accounts another
    /// transaction holds are left out of the result.
    static func lockExisting(_ sortedAccountIDs: [String], skipLocked: Bool, on connection: Connection) async throws -> [String: LockedState] {
        try await lock(sortedAccountIDs, skipLocked: skipLocked, placeholder: nil, on: connection)
    }

    /// ``lockStates(of:catalogue:now:skipLocked:on:)`` for a worker's claim, through
    /// `subsync_lock_account_states_to_resolve` (sql/0025, 0032): a missing account is reserved under its
    /// advisory lock instead of created with a placeholder, and the resolution inserts its row
    /// with its first resolved state, one row version instead of two. A reserved account's state
    /// is the catalogue's base state at `clock`'s now, read once the locks are held.
    ///
    /// Skipping on one PostgreSQL, `subsync_lock_account_states_skipping` (sql/0033) gives the
    /// same answer in three statements over the whole array instead of three or four per account;
    /// on Citus, `subsync_lock_account_states_by_bucket` (sql/0043) in three statements per shard
    /// of the accounts, which Citus routes to that shard: a worker's batch is one bucket, so one
    /// shard.
    static func lockStatesToResolve(
        of accountIDs: [String], catalogue: Catalogue, clock: any ServiceClock, topology: DatabaseTopology, skipLocked: Bool,
        on connection: Connection
    ) async throws -> [String: LockedState] {
        let sorted = Array(Set(accountIDs)).sorted()
        let rows: QueryResult
        if skipLocked {
            let function = try await topology.isCitus(on: connection)
                ? "subsync_lock_account_states_by_bucket" : "subsync_lock_account_states_skipping"
            rows = try await connection.preparedQuery(
                "SELECT account_id, state, last_sequence, resolved_at FROM \(unescaped: function)(\(sorted)::text[])"
            )
        } else {
            rows = try await connection.preparedQuery(
                """
                SELECT account_id, state, last_sequence, resolved_at
                FROM subsync_lock_account_states_to_resolve(\(sorted)::text[], \(skipLocked))
                """
            )
        }
        return try lockedStates(from: rows, reserved: Resolver.resolve(transactions: [], catalogue: catalogue, now: clock.now()))
    }

    /// `subsync_lock_account_states` (sql/0014, 0022, 0023, 0032): with a `placeholder`, missing rows are
    /// created with it first, one account at a time in the same order, each under an advisory
    /// lock on the account.
    private static func lock(
        _ sortedAccountIDs: [String], skipLocked: Bool, placeholder: AccountState?, on connection: Connection
    ) async throws -> [String: LockedState] {
        let rows = try await connection.preparedQuery(
            """
            SELECT account_id, state, last_sequence, resolved_at
            FROM subsync_lock_account_states(\(sortedAccountIDs)::text[], \(skipLocked),
                                             \(placeholder?.tier)::text, \(try placeholder.map { try JSONParameter($0) })::json)
            """
        )
        return try lockedStates(from: rows, reserved: nil)
    }

    /// The rows of either lock function; a NULL state is a reserved account, given `reserved`.
    private static func lockedStates(from rows: QueryResult, reserved: AccountState?) throws -> [String: LockedState] {
        var locked: [String: LockedState] = [:]
        for row in rows {
            let accountID = try row.decode(String.self, at: 0)
            let resolvedAt = try row.decode(Date.self, at: 3)
            if let reserved, row.isNull(1) {
                locked[accountID] = LockedState(state: reserved, lastSequence: 0, resolvedAt: nil, isReserved: true)
                continue
            }
            locked[accountID] = LockedState(
                state: try row.decode(JSONColumn<AccountState>.self, at: 1).value,
                lastSequence: try row.decode(Int64.self, at: 2),
                resolvedAt: resolvedAt == .distantPast ? nil : resolvedAt)
        }
        return locked
    }
}
