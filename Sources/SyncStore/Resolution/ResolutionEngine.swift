import Foundation
import Logging
import Postgres
import SyncCore

/// Resolves accounts in the database: the worker pool's batch, the expiry sweeper's due
/// accounts, and reconciliation all go through ``resolve(accounts:newReports:origin:on:)``,
/// so there is one way state, events and deliveries are written.
///
/// Within one transaction it
/// 1. locks the accounts' `account_states` rows in sorted order (creating missing ones; a
///    worker's claim reserves them under their advisory lock instead, and inserts each row
///    once with its resolved state, sql/0025), so concurrent workers, sweepers and operators on
///    the same account serialise and cannot deadlock;
/// 2. joins new reports into the stored transaction aggregates (a join: order-free);
/// 3. resolves each account with the catalogue at `now`;
/// 4. writes aggregates, account state, entitlements, events with gap-free per-account
///    sequence numbers, and one delivery per subscribed enabled endpoint (the outbox).
public struct ResolutionEngine: Sendable {
    /// The NOTIFY channel that tells delivery workers new deliveries exist.
    public static let deliveriesChannel = "subsync_deliveries"

    public let pool: ConnectionPool
    public let catalogue: Catalogue
    let clock: any ServiceClock
    let logger: Logger
    /// Whether the database is a Citus one: a worker's account locks have a single-server form.
    let topology = DatabaseTopology()

    public init(
        pool: ConnectionPool,
        catalogue: Catalogue,
        clock: any ServiceClock = SystemClock(),
        logger: Logger = Logger(label: "subsync.resolution")
    ) {
        self.pool = pool
        self.catalogue = catalogue
        self.clock = clock
        self.logger = logger
    }

    /// The outcome of resolving a set of accounts.
    public struct Outcome: Sendable, Equatable {
        /// Reports joined into aggregates.
        public var reportsResolved = 0
        /// Accounts resolved.
        public var accountsResolved = 0
        /// Events written.
        public var eventsWritten = 0
        /// Accounts whose reports failed and were set aside (attempts counted, maybe quarantined).
        public var accountsFailed = 0
        /// Accounts a batch left for a later claim because another transaction held them (a
        /// worker, a sync binding a purchase, a usage write): queued again, not waited for.
        public var accountsDeferred = 0
        /// Claim queue entries left behind the batch's, as its claim estimated them (see
        /// `claimQueue`); 0 when the claim took nothing, or the batch was not a claim.
        public var queuedAfter = 0

        public init() {}

        static func + (lhs: Outcome, rhs: Outcome) -> Outcome {
            var sum = lhs
            sum.reportsResolved += rhs.reportsResolved
            sum.accountsResolved += rhs.accountsResolved
            sum.eventsWritten += rhs.eventsWritten
            sum.accountsFailed += rhs.accountsFailed
            sum.accountsDeferred += rhs.accountsDeferred
            sum.queuedAfter = max(lhs.queuedAfter, rhs.queuedAfter)
            return sum
        }
    }

    /// Where a resolution came from; recorded on its events.
    public enum Origin: String, Sendable {
        case worker, sweeper, reconcile, admin, store, transfer
        /// Device usage and holds (usage events).
        case usage
        /// A rewarded ad's callback (its credit event and usage events).
        case reward
    }

    /// Resolves `accounts` (sorted and deduplicated here) on `connection`, which must be inside
    /// a transaction. `newReports` are joined first; an account without new reports is simply
    /// re-resolved at the current time (the sweeper's and reconciliation's case).
    @discardableResult
    public func resolve(
        accounts: [String],
        newReports: [String: [Report]],
        origin: Origin,
        on connection: Connection
    ) async throws -> Outcome {
        try await resolve(accounts: accounts, aggregates: .join(newReports), origin: origin, on: connection)
    }

    /// Resolves `accounts` like ``resolve(accounts:newReports:origin:on:)``, but with their
    /// aggregates *replaced* by `ledgers` (an account missing from `ledgers` has none) instead of
    /// joined: reconciliation's repair, which rebuilds aggregates from the stored reports because
    /// the persisted ones may be wrong. Stored transactions absent from a ledger are deleted.
    /// `reportCounts` (account → transaction → count) sets `report_count` of transactions that
    /// had no row; existing rows keep theirs (it counts what was ever joined, pruned or not).
    @discardableResult
    public func resolve(
        accounts: [String],
        replacingAggregatesWith ledgers: [String: TransactionLedger],
        reportCounts: [String: [String: Int]] = [:],
        origin: Origin,
        on connection: Connection
    ) async throws -> Outcome {
        try await resolve(accounts: accounts, aggregates: .replace(ledgers, reportCounts), origin: origin, on: connection)
    }

    /// How a resolution gets its aggregates.
    private enum AggregateInput {
        /// Join these new reports into the stored aggregates (workers).
        case join([String: [Report]])
        /// Use these ledgers instead of the stored aggregates (reconciliation).
        case replace([String: TransactionLedger], [String: [String: Int]])
    }

    /// ``resolve(accounts:newReports:origin:on:)`` for accounts whose `account_states` rows this
    /// transaction has locked already (`locked`, from ``lockStates(of:on:)``): the claims.
    func resolve(
        locked: [String: LockedState],
        accounts: [String],
        newReports: [String: [Report]],
        origin: Origin,
        on connection: Connection
    ) async throws -> Outcome {
        try await resolve(accounts: accounts, aggregates: .join(newReports), origin: origin, locked: locked, on: connection)
    }

    private func resolve(
        accounts: [String],
        aggregates input: AggregateInput,
        origin: Origin,
        locked prelocked: [String: LockedState]? = nil,
        on connection: Connection
    ) async throws -> Outcome {
        let accountIDs = Array(Set(accounts)).sorted()
        guard !accountIDs.isEmpty else { return Outcome() }
        // 1. Lock (unless the caller holds the locks already).
        let locked: [String: LockedState]
        if let prelocked { locked = prelocked } else { locked = try await lockStates(of: accountIDs, on: connection) }
        // The clock is read only once the locks are held, and never goes back for an account:
        // a worker that waited on a lock must not resolve at an instant older than the one the
        // previous holder (another process, maybe with a skewed clock) already resolved at,
        // or an expired subscription would flap back to active.
        var now = clock.now()
        var previousStates: [String: (state: AccountState, sequence: Int64)] = [:]
        for (accountID, stored) in locked {
            previousStates[accountID] = (stored.state, stored.lastSequence)
            if let resolvedAt = stored.resolvedAt, resolvedAt > now { now = resolvedAt }
        }

        // 2. Load every aggregate of these accounts and join the new reports in (or, when
        //    reconciling, take the rebuilt ledgers as they are).
        var ledgers: [String: TransactionLedger] = [:]
        var changedTransactions: [ChangedTransaction] = []
        // The transactions these accounts have stored (read under the accounts' locks, which
        // every writer of `transactions` holds): the others are inserted without `ON CONFLICT`.
        var storedTransactions: Set<TransactionKey> = []
        var outcome = Outcome()
        let newReports: [String: [Report]]
        switch input {
        case .join(let reports):
            newReports = reports
            let opaque = try await keysOpaqueToPlanner(on: connection)
            let stored = try await connection.preparedQuery(
                "SELECT account_id, aggregate FROM transactions WHERE account_id = ANY(\(accountIDs, cast: "text[]", opaqueToPlanner: opaque))"
            )
            for row in stored {
                let accountID = try row.decode(String.self, at: 0)
                let aggregate = try row.decode(JSONColumn<TransactionAggregate>.self, at: 1).value
                storedTransactions.insert(TransactionKey(accountID: accountID, transactionID: aggregate.transactionID))
                ledgers[accountID, default: TransactionLedger()].add(aggregate)
            }
        case .replace(let replacements, let reportCounts):
            newReports = [:]
            for accountID in accountIDs {
                guard let ledger = replacements[accountID] else { continue }
                ledgers[accountID] = ledger
                for aggregate in ledger.unorderedAggregates {
                    // Written over whatever is stored: the replaced ledger was not read here.
                    changedTransactions.append(
                        ChangedTransaction(accountID: accountID, aggregate: aggregate,
                                           reportCount: reportCounts[accountID]?[aggregate.transactionID] ?? 0, mayBeStored: true))
                }
            }
            try await deleteTransactions(notIn: ledgers, of: accountIDs, on: connection)
        }
        for accountID in accountIDs {
            // Dates as the database will hold them: a state resolved from in-memory reports must
            // equal the same state resolved later from the stored ones.
            guard let reports = newReports[accountID]?.map(\.withStoredPrecision), !reports.isEmpty else { continue }
            var counts: [String: Int] = [:]
            for report in reports {
                ledgers[accountID, default: TransactionLedger()].add(report)
                counts[report.transactionID, default: 0] += 1
            }
            for (transactionID, count) in counts {
                if let aggregate = ledgers[accountID]?[transactionID] {
                    changedTransactions.append(
                        ChangedTransaction(accountID: accountID, aggregate: aggregate, reportCount: count,
                                           mayBeStored: storedTransactions.contains(TransactionKey(accountID: accountID, transactionID: transactionID))))
                }
            }
            outcome.reportsResolved += reports.count
        }

        // 3. Resolve and derive events.
        var states: [(accountID: String, state: AccountState, lastSequence: Int64)] = []
        var events: [Event] = []
        var usage: [(accountID: String, entries: [UsageEntry])] = []
        for accountID in accountIDs {
            let ledger = ledgers[accountID] ?? TransactionLedger()
            let current = Resolver.resolve(ledger: ledger, catalogue: catalogue, now: now)
            usage.append((accountID, UsageDerivation.entries(transactions: ledger.unorderedAggregates, catalogue: catalogue)))
            let previous = previousStates[accountID]
            var sequence = previous?.sequence ?? 0
            for draft in EventDeriver.events(previous: previous?.state, current: current, now: now) {
                sequence += 1
                events.append(
                    Event(draft: draft, id: RandomUUID.lowercaseString(), accountID: accountID, sequence: sequence, occurredAt: now)
                )
            }
            states.append((accountID, current, sequence))
        }
        // Consumables' credits and refunds: what is stored decides what a refund's reversal, a
        // second refund or a purchase that came back adds, and which credit entries are new
        // (their events).
        let withConsumables = usage.indices.filter { usage[$0].entries.contains { $0.kind == .credit } }
        let storedCredits = try await Self.storedCreditEntries(of: withConsumables.map { usage[$0].accountID }, on: connection)
        for index in withConsumables {
            let accountID = usage[index].accountID
            guard let ledger = ledgers[accountID] else { continue }
            // A transfer's reports are the purchases that moved to this account now.
            var arrived: Set<String> = []
            if origin == .transfer, case .join(let reports) = input {
                arrived = Set(reports[accountID]?.map(\.transactionID) ?? [])
            }
            usage[index].entries += UsageDerivation.creditCorrections(
                transactions: ledger.unorderedAggregates, catalogue: catalogue, stored: storedCredits[accountID] ?? [:],
                arrived: arrived, now: now)
        }
        events += creditEvents(for: usage, stored: storedCredits, states: &states, now: now)

        // 4. Write everything; the usage events follow from the ledger as written.
        try await writeTransactions(changedTransactions, on: connection)
        let credited = try await UsageLedger.writeDerived(usage, on: connection)
        events += try await usageEvents(
            credited: credited, retimed: Set(changedTransactions.map(\.accountID)), all: origin == .transfer ? accountIDs : [],
            states: &states, origin: origin, now: now, on: connection)
        outcome.accountsResolved = accountIDs.count
        outcome.eventsWritten = events.count
        // Each state is encoded once, for its row and for its account's events.
        var encodedStates: [String: (state: AccountState, json: EncodedJSON)] = [:]
        for (accountID, state, _) in states {
            encodedStates[accountID] = (state, try EncodedJSON(state))
        }
        try await writeStates(
            states, encoded: encodedStates, resolvedAt: now,
            reserved: Set(locked.lazy.filter(\.value.isReserved).map(\.key)), on: connection)
        try await Self.writeEvents(events, origin: origin, encodedStates: encodedStates, on: connection)
        return outcome
    }

    /// The usage events (`usage.low`, `usage.exhausted`, `usage.period_closed`) of the accounts
    /// whose ledger this resolution changed in a way that can matter: a credit or refund
    /// (`credited`), new facts about transactions on an account that has had usage (`retimed`:
    /// the allowance periods derived from them may have moved), periods that have ended unclosed
    /// (the sweeper's visit), and `all` (a transfer, which debits the old account); numbered
    /// after each account's other events.
    private func usageEvents(
        credited: Set<String>, retimed: Set<String>, all: [String],
        states: inout [(accountID: String, state: AccountState, lastSequence: Int64)],
        origin: Origin, now: Date, on connection: Connection
    ) async throws -> [Event] {
        // The sweeper visits accounts whose state changes with time (a lapse starts a period)
        // and whose closed periods have a revision due: every one of them is looked at.
        let retimed = origin == .sweeper ? retimed.union(states.map(\.accountID)) : retimed
        // Runs even without meters in the catalogue: periods of a meter that was removed must
        // still close, or the sweeper would visit their accounts forever.
        var evaluated = credited.union(all)
        let opaque = try await keysOpaqueToPlanner(on: connection)
        for row in try await connection.preparedQuery(
            """
            SELECT DISTINCT account_id FROM usage_periods
            WHERE account_id = ANY(\(states.map(\.accountID), cast: "text[]", opaqueToPlanner: opaque))
              AND ((closed_revision = 0 AND period_end <= \(now))
                   OR account_id = ANY(\(Array(retimed), cast: "text[]", opaqueToPlanner: opaque)))
            """
        ) {
            evaluated.insert(try row.decode(String.self, at: 0))
        }
        guard !evaluated.isEmpty else { return [] }
        let notices = try await UsageEvents.notices(
            of: Array(evaluated), catalogue: catalogue, now: now, announcingRevisions: origin == .sweeper || origin == .reconcile,
            on: connection)
        var events: [Event] = []
        for index in states.indices {
            guard let accountNotices = notices[states[index].accountID], !accountNotices.isEmpty else { continue }
            var account = UsageEvents.Account(accountID: states[index].accountID, state: states[index].state, lastSequence: states[index].lastSequence)
            for notice in accountNotices {
                events.append(UsageEvents.event(&account, type: notice.type, now: now, usage: notice.usage))
            }
            states[index].lastSequence = account.lastSequence
        }
        return events
    }

    /// The ids of the consumables' credit entries (`credit`, `credit_revoked`, `credit_restored`)
    /// of `accountIDs`: per account, per meter.
    static func storedCreditEntries(of accountIDs: [String], on connection: Connection) async throws -> [String: [String: Set<String>]] {
        guard !accountIDs.isEmpty else { return [:] }
        var stored: [String: [String: Set<String>]] = [:]
        for row in try await connection.preparedQuery(
            """
            SELECT account_id, meter, entry_id FROM usage_entries
            WHERE account_id = ANY(\(accountIDs)::text[]) AND kind IN ('credit', 'credit_revoked', 'credit_restored')
            """
        ) {
            stored[try row.decode(String.self, at: 0), default: [:]][try row.decode(String.self, at: 1), default: []]
                .insert(try row.decode(String.self, at: 2))
        }
        return stored
    }

    /// `credits.granted` / `credits.revoked` for the consumables' credit entries this resolution
    /// writes for the first time (not in `stored`), numbered after the account's other events.
    private func creditEvents(
        for usage: [(accountID: String, entries: [UsageEntry])], stored: [String: [String: Set<String>]],
        states: inout [(accountID: String, state: AccountState, lastSequence: Int64)], now: Date
    ) -> [Event] {
        var events: [Event] = []
        for (accountID, entries) in usage {
            let new = entries
                .filter { [.credit, .creditRevoked, .creditRestored].contains($0.kind) && stored[accountID]?[$0.meter]?.contains($0.id) != true }
                .sorted { ($0.kind == .credit ? 0 : 1, $0.at, $0.id) < ($1.kind == .credit ? 0 : 1, $1.at, $1.id) }
            guard !new.isEmpty, let index = states.firstIndex(where: { $0.accountID == accountID }) else { continue }
            var account = UsageEvents.Account(accountID: accountID, state: states[index].state, lastSequence: states[index].lastSequence)
            for entry in new {
                if let event = UsageEvents.creditEvent(
                    &account, entry: entry, transactionID: UsageDerivation.transactionID(ofCreditEntry: entry.id), now: now)
                {
                    events.append(event)
                }
            }
            states[index].lastSequence = account.lastSequence
        }
        return events
    }

    /// Deletes the stored transactions of `accountIDs` that `ledgers` do not have.
    private func deleteTransactions(notIn ledgers: [String: TransactionLedger], of accountIDs: [String], on connection: Connection) async throws {
        var keptAccounts: [String] = []
        var keptTransactions: [String] = []
        for (accountID, ledger) in ledgers {
            for aggregate in ledger.unorderedAggregates {
                keptAccounts.append(accountID)
                keptTransactions.append(aggregate.transactionID)
            }
        }
        try await connection.preparedQuery(
            """
            DELETE FROM transactions AS t
            WHERE t.account_id = ANY(\(accountIDs)::text[])
              AND NOT EXISTS (
                SELECT 1 FROM unnest(\(keptAccounts)::text[], \(keptTransactions)::text[]) AS k(a, id)
                WHERE k.a = t.account_id AND k.id = t.transaction_id)
            """
        )
    }

    /// A transaction aggregate a resolution writes.
    struct ChangedTransaction {
        var accountID: String
        var aggregate: TransactionAggregate
        /// Reports joined into it by this resolution (added to the stored count).
        var reportCount: Int
        /// False when the account's stored transactions were read under its lock and this one
        /// was not among them: it is inserted, not upserted.
        var mayBeStored: Bool
    }

    /// A transaction's key in `transactions`.
    struct TransactionKey: Hashable {
        var accountID: String
        var transactionID: String
    }

    /// Writes `changed`: the transactions new to their accounts with a plain `INSERT`, the others
    /// over their rows (`ON CONFLICT ... DO UPDATE`). An upsert is a speculative insertion, an
    /// arbiter probe and a confirmation record a row: 18.1-19.3 ms against 14.1-15.6 ms for the
    /// same 1,760 new rows (docs/performance/JOURNAL.md item 45), and a batch's transactions are
    /// mostly new (a renewal is a new transaction).
    private func writeTransactions(_ changed: [ChangedTransaction], on connection: Connection) async throws {
        let new = changed.filter { !$0.mayBeStored }
        if !new.isEmpty { try await connection.preparedQuery(Self.transactionsInsert(new, upsert: false)) }
        let stored = changed.filter(\.mayBeStored)
        if !stored.isEmpty { try await connection.preparedQuery(Self.transactionsInsert(stored, upsert: true)) }
    }

    private static func transactionsInsert(_ changed: [ChangedTransaction], upsert: Bool) throws -> PostgresQuery {
        let aggregates = changed.map(\.aggregate)
        return """
            INSERT INTO transactions (
                account_id, transaction_id, original_transaction_id, product_id, expires_at,
                grace_period_expires_at, revoked, is_upgraded, report_count, aggregate, updated_at
            )
            SELECT a, t, o, p, e, g, r, u, c, j::json, now() FROM unnest(
                \(changed.map(\.accountID))::text[],
                \(aggregates.map(\.transactionID))::text[],
                \(aggregates.map(\.originalTransactionID))::text[],
                \(aggregates.map(\.productID))::text[],
                \(aggregates.map(\.expiresAt))::timestamptz[],
                \(aggregates.map(\.gracePeriodExpiresAt))::timestamptz[],
                \(aggregates.map(\.isRevoked))::boolean[],
                \(aggregates.map(\.isUpgraded))::boolean[],
                \(changed.map { Int64($0.reportCount) })::bigint[],
                \(try aggregates.map(Self.json))::text[]
            ) AS v(a, t, o, p, e, g, r, u, c, j)
            \(unescaped: upsert ? Self.transactionsUpsertClause : "")
            """
    }

    private static let transactionsUpsertClause = """
        ON CONFLICT (account_id, transaction_id) DO UPDATE SET
            original_transaction_id = EXCLUDED.original_transaction_id,
            product_id = EXCLUDED.product_id,
            expires_at = EXCLUDED.expires_at,
            grace_period_expires_at = EXCLUDED.grace_period_expires_at,
            revoked = EXCLUDED.revoked,
            is_upgraded = EXCLUDED.is_upgraded,
            report_count = transactions.report_count + EXCLUDED.report_count,
            aggregate = EXCLUDED.aggregate,
            updated_at = EXCLUDED.updated_at -- not now(): Citus allows only immutable functions here
        """

    /// Writes the resolved states: over the accounts' rows, or, for the accounts `reserved` by
    /// ``lockStatesToResolve(of:skipLocked:on:)``, as their new rows.
    private func writeStates(
        _ states: [(accountID: String, state: AccountState, lastSequence: Int64)],
        encoded: [String: (state: AccountState, json: EncodedJSON)],
        resolvedAt: Date,
        reserved: Set<String>,
        on connection: Connection
    ) async throws {
        func columns(_ states: [(accountID: String, state: AccountState, lastSequence: Int64)]) throws
            -> (ids: [String], tiers: [String], states: [String], sequences: [Int64], transitions: [Date?]) {
            (states.map(\.accountID), states.map(\.state.tier),
             try states.map { try encoded[$0.accountID].map { String(decoding: $0.json.bytes, as: UTF8.self) } ?? Self.json($0.state) },
             states.map(\.lastSequence), states.map(\.state.nextTransitionAt))
        }
        let inserted = reserved.isEmpty ? [] : states.filter { reserved.contains($0.accountID) }
        let updated = inserted.isEmpty ? states : states.filter { !reserved.contains($0.accountID) }
        if !updated.isEmpty {
            let v = try columns(updated)
            try await connection.preparedQuery(
                """
                UPDATE account_states AS s SET
                    tier = v.tier,
                    state = v.state::json,
                    last_sequence = v.last_sequence,
                    next_transition_at = v.next_transition_at,
                    resolved_at = \(resolvedAt),
                    updated_at = CASE WHEN s.state::text = v.state THEN s.updated_at ELSE \(resolvedAt)::timestamptz END
                FROM unnest(
                    \(v.ids)::text[], \(v.tiers)::text[], \(v.states)::text[], \(v.sequences)::bigint[], \(v.transitions)::timestamptz[]
                ) AS v(account_id, tier, state, last_sequence, next_transition_at)
                WHERE s.account_id = v.account_id
                """
            )
        }
        if !inserted.isEmpty {
            // Under the advisory lock the claim took (sql/0025); a row that appeared without it
            // (an operator's reconcile repair) fails this insert and the batch is retried.
            let v = try columns(inserted)
            try await connection.preparedQuery(
                """
                INSERT INTO account_states (account_id, tier, state, last_sequence, next_transition_at, resolved_at, updated_at)
                SELECT v.account_id, v.tier, v.state::json, v.last_sequence, v.next_transition_at, \(resolvedAt), \(resolvedAt)
                FROM unnest(
                    \(v.ids)::text[], \(v.tiers)::text[], \(v.states)::text[], \(v.sequences)::bigint[], \(v.transitions)::timestamptz[]
                ) AS v(account_id, tier, state, last_sequence, next_transition_at)
                """
            )
        }
        let accountIDs = states.map(\.accountID)
        var entitlementAccounts: [String] = []
        var entitlements: [EntitlementState] = []
        for (accountID, state, _) in states {
            for entitlement in state.entitlements {
                entitlementAccounts.append(accountID)
                entitlements.append(entitlement)
            }
        }
        // Entitlements that vanished from the resolved state (e.g. a catalogue change) go too.
        try await connection.preparedQuery(
            """
            DELETE FROM entitlements AS e
            WHERE e.account_id = ANY(\(accountIDs)::text[])
              AND NOT EXISTS (
                SELECT 1 FROM unnest(\(entitlementAccounts)::text[], \(entitlements.map(\.id))::text[]) AS k(a, id)
                WHERE k.a = e.account_id AND k.id = e.entitlement_id)
            """
        )
        guard !entitlements.isEmpty else { return }
        try await connection.preparedQuery(
            """
            INSERT INTO entitlements (
                account_id, entitlement_id, status, expires_at, product_id, source_transaction_id,
                will_renew, state, updated_at
            )
            SELECT a, id, st, e, p, t, w, j::json, now() FROM unnest(
                \(entitlementAccounts)::text[],
                \(entitlements.map(\.id))::text[],
                \(entitlements.map(\.status.rawValue))::text[],
                \(entitlements.map(\.expiresAt))::timestamptz[],
                \(entitlements.map(\.productID))::text[],
                \(entitlements.map(\.sourceTransactionID))::text[],
                \(entitlements.map(\.willRenew))::boolean[],
                \(try entitlements.map(Self.json))::text[]
            ) AS v(a, id, st, e, p, t, w, j)
            ON CONFLICT (account_id, entitlement_id) DO UPDATE SET
                status = EXCLUDED.status,
                expires_at = EXCLUDED.expires_at,
                product_id = EXCLUDED.product_id,
                source_transaction_id = EXCLUDED.source_transaction_id,
                will_renew = EXCLUDED.will_renew,
                state = EXCLUDED.state,
                updated_at = CASE WHEN entitlements.state::text = EXCLUDED.state::text THEN entitlements.updated_at ELSE EXCLUDED.updated_at END
            """
        )
    }

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
    /// `resolved_at` is -infinity: it has never been resolved.
    ///
    /// With `skipLocked`, accounts another transaction holds, or is creating, are left out of the
    /// result instead of waited for (sql/0023: creators take an advisory lock on the account
    /// first, which this only tries).
    func lockStates(of accountIDs: [String], skipLocked: Bool = false, on connection: Connection) async throws -> [String: LockedState] {
        try await Self.lockStates(of: accountIDs, catalogue: catalogue, now: clock.now(), skipLocked: skipLocked, on: connection)
    }

    /// ``lockStates(of:skipLocked:on:)`` for callers without an engine (usage holds serialize on
    /// the same row).
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

    /// Whether a batch's key arrays go to the planner opaque (`= ANY((SELECT $1::text[])::text[])`):
    /// on one PostgreSQL, yes: a custom plan estimated each of 500 constant keys (1.4–2.4 ms a
    /// plan for the aggregates' select, 37 ms of a 40,000-report drain) and, on a table of
    /// 16,000 rows, scanned it whole (3.2–3.7 ms) where the index took 1.0–1.7 ms. On Citus, no:
    /// its planner reads the keys to send the statement only to their shards
    /// (docs/performance/JOURNAL.md item 39).
    func keysOpaqueToPlanner(on connection: Connection) async throws -> Bool {
        try await !topology.isCitus(on: connection)
    }

    /// ``lockStates(of:skipLocked:on:)`` for a worker's claim, through
    /// `subsync_lock_account_states_to_resolve` (sql/0025, 0032): a missing account is reserved under its
    /// advisory lock instead of created with a placeholder, and ``writeStates`` inserts its row
    /// with its first resolved state, one row version instead of two.
    ///
    /// Skipping on one PostgreSQL, `subsync_lock_account_states_skipping` (sql/0033) gives the
    /// same answer in three statements over the whole array instead of three or four per account.
    func lockStatesToResolve(of accountIDs: [String], skipLocked: Bool, on connection: Connection) async throws -> [String: LockedState] {
        let sorted = Array(Set(accountIDs)).sorted()
        let rows: QueryResult
        if skipLocked, try await !topology.isCitus(on: connection) {
            rows = try await connection.preparedQuery(
                "SELECT account_id, state, last_sequence, resolved_at FROM subsync_lock_account_states_skipping(\(sorted)::text[])"
            )
        } else {
            rows = try await connection.preparedQuery(
                """
                SELECT account_id, state, last_sequence, resolved_at
                FROM subsync_lock_account_states_to_resolve(\(sorted)::text[], \(skipLocked))
                """
            )
        }
        return try Self.lockedStates(from: rows, reserved: Resolver.resolve(transactions: [], catalogue: catalogue, now: clock.now()))
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

    /// Writes `events` and their deliveries. `encodedStates` holds states encoded already, by
    /// account: an event whose state is the one there embeds that encoding.
    static func writeEvents(
        _ events: [Event], origin: Origin,
        encodedStates: [String: (state: AccountState, json: EncodedJSON)] = [:],
        on connection: Connection
    ) async throws {
        guard !events.isEmpty else { return }
        let ids = events.map(\.id)
        let payloads = try events.map { event in
            guard let encoded = encodedStates[event.accountID], encoded.state == event.state else { return try Self.json(event) }
            return try Self.json(EventPayload(event: event, state: encoded.json))
        }
        try await connection.preparedQuery(
            """
            INSERT INTO events (account_id, sequence, event_id, type, origin, occurred_at, payload)
            SELECT a, s, i::uuid, t, \(origin.rawValue), o, p::json FROM unnest(
                \(events.map(\.accountID))::text[],
                \(events.map(\.sequence))::bigint[],
                \(ids)::text[],
                \(events.map(\.type.rawValue))::text[],
                \(events.map(\.occurredAt))::timestamptz[],
                \(payloads)::text[]
            ) AS v(a, s, i, t, o, p)
            """
        )
        // The outbox: one delivery per event and subscribed, enabled endpoint, due when the event
        // occurred on the engine's clock (not the database's), so delivery and resolution share
        // one time.
        let deliveries = try await connection.preparedQuery(
            """
            INSERT INTO deliveries (account_id, endpoint_id, event_sequence, event_id, next_attempt_at)
            SELECT v.a, w.endpoint_id, v.s, v.i::uuid, v.o
            FROM unnest(
                \(events.map(\.accountID))::text[], \(events.map(\.sequence))::bigint[], \(ids)::text[], \(events.map(\.type.rawValue))::text[],
                \(events.map(\.occurredAt))::timestamptz[]
            ) AS v(a, s, i, t, o)
            JOIN webhook_endpoints AS w ON w.enabled AND (w.event_types IS NULL OR v.t = ANY(w.event_types))
            ORDER BY v.a, v.s
            """
        )
        if deliveries.affectedRows > 0 {
            try await connection.notify(channel: Self.deliveriesChannel)
        }
    }

    static func json(_ value: some Encodable) throws -> String {
        try PostgresJSONEncoder.string(value)
    }

    /// An event encoded with its state encoded before.
    private struct EventPayload: JSONWritable {
        var event: Event
        var state: EncodedJSON

        func encode(to encoder: any Encoder) throws {
            try event.encode(to: encoder, state: state)
        }

        func write(to writer: inout JSONWriter) throws {
            try event.write(to: &writer) { w in w.raw(state.bytes) }
        }
    }
}

extension Report {
    /// This report with every date rounded to the microsecond, PostgreSQL's precision.
    var withStoredPrecision: Report {
        var report = self
        report.observedAt = observedAt.roundedToMicroseconds
        report.purchasedAt = purchasedAt.roundedToMicroseconds
        report.expiresAt = expiresAt?.roundedToMicroseconds
        report.gracePeriodExpiresAt = gracePeriodExpiresAt?.roundedToMicroseconds
        report.revokedAt = revokedAt?.roundedToMicroseconds
        report.trust.signedDate = trust.signedDate?.roundedToMicroseconds
        return report
    }
}
