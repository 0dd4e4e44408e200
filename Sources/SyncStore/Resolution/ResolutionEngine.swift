import Foundation
import Logging
import Postgres
import SyncCore

/// Resolves accounts in the database: the worker pool's batch, the expiry sweeper's due
/// accounts, and reconciliation all go through ``resolve(accounts:newReports:origin:on:)``,
/// so there is one way state, events and deliveries are written.
///
/// Within one transaction it
/// 1. locks the accounts' `account_states` rows in sorted order (``AccountLocks``: creating
///    missing ones; a worker's claim reserves them under their advisory lock instead, and
///    inserts each row once with its resolved state, sql/0025), so concurrent workers, sweepers
///    and operators on the same account serialise and cannot deadlock;
/// 2. joins new reports into the stored transaction aggregates (a join: order-free);
/// 3. resolves each account with the catalogue at `now`;
/// 4. writes aggregates, account state, entitlements, and events with gap-free per-account
///    sequence numbers with their deliveries (``Outbox``).
public struct ResolutionEngine: Sendable {
    public let pool: ConnectionPool
    public let catalogue: Catalogue
    let clock: any ServiceClock
    let logger: Logger
    /// Whether the database is a Citus one: a worker's account locks have a single-server form.
    let topology = DatabaseTopology()
    /// On Citus, sends a batch of one bucket to the node that holds it (``WorkBuckets``).
    let router: AccountRouter?
    /// The claim queue's buckets when it is distributed by them.
    let workBuckets = WorkBuckets()

    public init(
        pool: ConnectionPool,
        catalogue: Catalogue,
        clock: any ServiceClock = SystemClock(),
        logger: Logger = Logger(label: "subsync.resolution"),
        router: AccountRouter? = nil
    ) {
        self.pool = pool
        self.router = router
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
        /// Claim queue entries left after the batch's, as its claim estimated them (see
        /// `claimQueue`); 0 when the claim took nothing, or the batch was not a claim.
        public var queuedAfter = 0
        /// Claim queue entries the batch took (0 when it was not a claim).
        public var entriesClaimed = 0

        public init() {}

        static func + (lhs: Outcome, rhs: Outcome) -> Outcome {
            var sum = lhs
            sum.reportsResolved += rhs.reportsResolved
            sum.accountsResolved += rhs.accountsResolved
            sum.eventsWritten += rhs.eventsWritten
            sum.accountsFailed += rhs.accountsFailed
            sum.accountsDeferred += rhs.accountsDeferred
            sum.queuedAfter = max(lhs.queuedAfter, rhs.queuedAfter)
            sum.entriesClaimed += rhs.entriesClaimed
            return sum
        }
    }

    /// Resolves `accounts` (sorted and deduplicated here) on `connection`, which must be inside
    /// a transaction. `newReports` are joined first; an account without new reports is simply
    /// re-resolved at the current time (the sweeper's and reconciliation's case).
    @discardableResult
    public func resolve(
        accounts: [String],
        newReports: [String: [Report]],
        origin: Outbox.Origin,
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
        origin: Outbox.Origin,
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
    /// transaction has locked already (`locked`, from ``AccountLocks``): the claims.
    func resolve(
        locked: [String: AccountLocks.LockedState],
        accounts: [String],
        newReports: [String: [Report]],
        origin: Outbox.Origin,
        on connection: Connection
    ) async throws -> Outcome {
        try await resolve(accounts: accounts, aggregates: .join(newReports), origin: origin, locked: locked, on: connection)
    }

    private func resolve(
        accounts: [String],
        aggregates input: AggregateInput,
        origin: Outbox.Origin,
        locked prelocked: [String: AccountLocks.LockedState]? = nil,
        on connection: Connection
    ) async throws -> Outcome {
        let accountIDs = Array(Set(accounts)).sorted()
        guard !accountIDs.isEmpty else { return Outcome() }
        // 1. Lock (unless the caller holds the locks already).
        let locked: [String: AccountLocks.LockedState]
        if let prelocked {
            locked = prelocked
        } else {
            locked = try await AccountLocks.lockStates(of: accountIDs, catalogue: catalogue, now: clock.now(), on: connection)
        }
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
        let storedCredits = try await UsageLedger.storedCreditEntries(of: withConsumables.map { usage[$0].accountID }, on: connection)
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
        try await Outbox.write(events, origin: origin, encodedStates: encodedStates, on: connection)
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
        origin: Outbox.Origin, now: Date, on connection: Connection
    ) async throws -> [Event] {
        // The sweeper visits accounts whose state changes with time (a lapse starts a period)
        // and whose closed periods have a revision due: every one of them is looked at.
        let retimed = origin == .sweeper ? retimed.union(states.map(\.accountID)) : retimed
        // Runs even without meters in the catalogue: periods of a meter that was removed must
        // still close, or the sweeper would visit their accounts forever.
        var evaluated = credited.union(all)
        let opaque = try await keysOpaqueToPlanner(on: connection)
        // The retimed accounts as an array that holds the row's account, not as a second
        // `account_id = ANY(…)`: Citus prunes no shard for a condition on the distribution column
        // under an `OR`, and the statement would read all 32 (docs/CITUS.md, "Scale-out: the plan").
        for row in try await connection.preparedQuery(
            """
            SELECT DISTINCT account_id FROM usage_periods
            WHERE account_id = ANY(\(states.map(\.accountID), cast: "text[]", opaqueToPlanner: opaque))
              AND ((closed_revision = 0 AND period_end <= \(now))
                   OR \(Array(retimed))::text[] @> ARRAY[account_id])
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
    /// over their rows (`ON CONFLICT ... DO UPDATE`), as an upsert costs more a row (a speculative
    /// insertion, an arbiter probe and a confirmation record) and a batch's transactions are mostly
    /// new, a renewal being a new transaction (docs/PERFORMANCE.md, "In the code").
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
                \(try aggregates.map(JSONText.of))::text[]
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
    /// ``AccountLocks/lockStatesToResolve(of:catalogue:clock:topology:skipLocked:on:)``, as their new rows.
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
             try states.map { try encoded[$0.accountID].map { String(decoding: $0.json.bytes, as: UTF8.self) } ?? JSONText.of($0.state) },
             states.map(\.lastSequence), states.map(\.state.nextTransitionAt))
        }
        let inserted = reserved.isEmpty ? [] : states.filter { reserved.contains($0.accountID) }
        let updated = inserted.isEmpty ? states : states.filter { !reserved.contains($0.accountID) }
        if !updated.isEmpty {
            let v = try columns(updated)
            var update: PostgresQuery = """
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
            // On Citus, the accounts named as well: joined with `unnest` alone, the update runs on
            // every shard (docs/CITUS.md, "Scale-out: the plan").
            if try await !keysOpaqueToPlanner(on: connection) {
                update.binds.append(v.ids.postgresValue)
                update.sql += " AND s.account_id = ANY($\(update.binds.count)::text[])"
            }
            try await connection.preparedQuery(update)
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
                \(try entitlements.map(JSONText.of))::text[]
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

    /// Whether a batch's key arrays go to the planner opaque (`= ANY((SELECT $1::text[])::text[])`):
    /// on one PostgreSQL, yes, so that a plan is not made for each call's keys; on Citus, no: its
    /// planner reads the keys to send the statement only to their shards (docs/PERFORMANCE.md, "In
    /// the code").
    func keysOpaqueToPlanner(on connection: Connection) async throws -> Bool {
        try await !topology.isCitus(on: connection)
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
