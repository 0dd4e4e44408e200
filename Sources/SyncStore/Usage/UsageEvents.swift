import Foundation
import Postgres
import SyncCore

/// The usage events in SQL (docs/USAGE.md "Events"): `usage.low`, `usage.exhausted` and
/// `usage.period_closed`, decided by ``UsageNotices`` from an account's ledger and the marks
/// stored in `usage_periods`, and the `credits.*` events of the ledger's grants and debits.
///
/// Everything here runs inside the transaction that changed the ledger, under the account's
/// `account_states` row lock (the resolving transaction's lock), so the events are numbered in
/// the account's one sequence, written with their deliveries (the outbox), and fire once
/// whichever process writes.
enum UsageEvents {
    /// An account written under its lock: its resolved state (the events' snapshot) and the
    /// last sequence number it used.
    struct Account {
        var accountID: String
        var state: AccountState
        var lastSequence: Int64
    }

    /// The next event of `account`, numbered after its last one.
    static func event(
        _ account: inout Account, type: EventType, now: Date, credit: CreditChange? = nil, usage: UsageSnapshot? = nil
    ) -> Event {
        account.lastSequence += 1
        return Event(
            id: RandomUUID.lowercaseString(), accountID: account.accountID, sequence: account.lastSequence, type: type,
            occurredAt: now, entitlementID: nil, previous: nil, current: nil, previousTier: nil, state: account.state,
            credit: credit, usage: usage)
    }

    /// The `credits.granted` or `credits.revoked` of a ledger entry that grants or takes back
    /// units (a debit's units are reported positive: the type says which way they went).
    static func creditEvent(
        _ account: inout Account, entry: UsageEntry, transactionID: String?, actor: String? = nil, reason: String? = nil, now: Date
    ) -> Event? {
        let source: CreditChange.Source
        switch entry.kind {
        case .credit, .creditRevoked, .creditRestored: source = .consumable
        case .reward: source = .reward
        case .adjustment: source = .adjustment
        case .allowance, .usage: return nil
        }
        let units = entry.units ?? 0
        let taken = entry.kind == .creditRevoked || units < 0
        return event(
            &account, type: taken ? .creditsRevoked : .creditsGranted, now: now,
            credit: CreditChange(
                meter: entry.meter, units: abs(units), source: source, transactionID: transactionID, entryID: entry.id,
                actor: actor, reason: reason))
    }

    /// Evaluates the usage notices of `accountIDs` at `now` from their ledgers and stored
    /// marks, writes the marks that changed, and returns each account's notices in order.
    /// `announcingRevisions`: whether closed periods' changed totals are announced now (the
    /// sweeper, reconcile) or marked due for the sweeper (every writer), which coalesces them.
    static func notices(
        of accountIDs: [String], catalogue: Catalogue, now: Date, announcingRevisions: Bool, on connection: Connection
    ) async throws -> [String: [UsageNotices.Notice]] {
        guard !accountIDs.isEmpty else { return [:] }
        // Under the accounts' locks (every caller holds them): missing period rows are stored.
        let balances = try await UsageTotals.balances(of: accountIDs, meter: nil, catalogue: catalogue, now: now, storing: true, on: connection)
        var marks: [String: [String: [UsagePeriod: UsagePeriodMarks]]] = [:]
        for row in try await connection.preparedQuery(
            """
            SELECT account_id, meter, period_start, period_end, low, exhausted, closed_revision, closed_totals::text, revision_due
            FROM usage_periods WHERE account_id = ANY(\(accountIDs)::text[])
            """
        ) {
            let period = UsagePeriod(start: try row.decode(Date.self, at: 2), end: try row.decode(Date.self, at: 3))
            let meter = try row.decode(String.self, at: 1)
            marks[try row.decode(String.self, at: 0), default: [:]][meter, default: [:]][period] = UsagePeriodMarks(
                meter: meter, period: period, low: try row.decode(Bool.self, at: 4), exhausted: try row.decode(Bool.self, at: 5),
                closedRevision: Int(try row.decode(Int32.self, at: 6)),
                closedTotals: try row.decode(JSONColumn<UsageBalance.Period>?.self, at: 7)?.value,
                revisionDue: try row.decode(Bool.self, at: 8))
        }

        var notices: [String: [UsageNotices.Notice]] = [:]
        var changed: [(accountID: String, marks: UsagePeriodMarks)] = []
        let known = Set(catalogue.meters.map(\.id))
        for accountID in Set(accountIDs).sorted() {
            // Periods of a meter the catalogue no longer has close quietly once they end.
            for (meter, periods) in marks[accountID] ?? [:] where !known.contains(meter) {
                for var mark in periods.values where mark.closedRevision == 0 && mark.period.end <= now {
                    mark.closedRevision = 1
                    changed.append((accountID, mark))
                }
            }
            for meter in catalogue.meters {
                guard let balance = balances[accountID]?.first(where: { $0.meter == meter.id }) else { continue }
                let result = UsageNotices.evaluate(
                    balance: balance, meter: meter, currency: catalogue.document.currency,
                    marks: marks[accountID]?[meter.id] ?? [:], now: now, announcingRevisions: announcingRevisions)
                notices[accountID, default: []] += result.notices
                changed += result.marks.map { (accountID, $0) }
            }
        }
        guard !changed.isEmpty else { return notices }
        try await connection.preparedQuery(
            """
            INSERT INTO usage_periods (
                account_id, meter, period_start, period_end, low, exhausted, closed_revision, closed_totals, revision_due, updated_at)
            SELECT a, m, s, e, l, x, r, t::jsonb, d, now() FROM unnest(
                \(changed.map(\.accountID))::text[], \(changed.map(\.marks.meter))::text[],
                \(changed.map(\.marks.period.start))::timestamptz[], \(changed.map(\.marks.period.end))::timestamptz[],
                \(changed.map(\.marks.low))::boolean[], \(changed.map(\.marks.exhausted))::boolean[],
                \(changed.map { Int64($0.marks.closedRevision) })::bigint[],
                \(try changed.map { try $0.marks.closedTotals.map(JSONText.of) })::text[],
                \(changed.map(\.marks.revisionDue))::boolean[]
            ) AS v(a, m, s, e, l, x, r, t, d)
            ON CONFLICT (account_id, meter, period_start, period_end) DO UPDATE SET
                low = EXCLUDED.low, exhausted = EXCLUDED.exhausted, closed_revision = EXCLUDED.closed_revision,
                closed_totals = EXCLUDED.closed_totals, revision_due = EXCLUDED.revision_due,
                updated_at = EXCLUDED.updated_at -- (Citus: immutable only)
            """
        )
        return notices
    }

    /// For the writers outside the resolution engine (device usage, holds, rewards,
    /// adjustments), which hold the account's lock (`locked`, from ``AccountLocks``): `credits` (entries with their
    /// transaction and audit), then the account's usage notices, as events with their
    /// deliveries, and the account's last sequence moved on. Returns the events written.
    @discardableResult
    static func write(
        credits: [(entry: UsageEntry, transactionID: String?, actor: String?, reason: String?)] = [],
        accountID: String, locked: AccountLocks.LockedState?, catalogue: Catalogue, origin: Outbox.Origin,
        now: Date, on connection: Connection
    ) async throws -> [Event] {
        // Never before the instant the account was last resolved at (the request's time was
        // read before the lock was granted): a period the sweeper closed meanwhile is closed.
        let now = max(now, locked?.resolvedAt ?? now)
        var account = Account(
            accountID: accountID,
            state: locked?.state ?? Resolver.resolve(transactions: [], catalogue: catalogue, now: now),
            lastSequence: locked?.lastSequence ?? 0)
        var events = credits.compactMap {
            creditEvent(&account, entry: $0.entry, transactionID: $0.transactionID, actor: $0.actor, reason: $0.reason, now: now)
        }
        let evaluated = try await notices(of: [accountID], catalogue: catalogue, now: now, announcingRevisions: false, on: connection)
        for notice in evaluated[accountID] ?? [] {
            events.append(event(&account, type: notice.type, now: now, usage: notice.usage))
        }
        guard !events.isEmpty else { return [] }
        try await Outbox.write(events, origin: origin, on: connection)
        try await connection.preparedQuery(
            "UPDATE account_states SET last_sequence = \(account.lastSequence) WHERE account_id = \(accountID)"
        )
        return events
    }
}
