import Foundation
import Logging
import Postgres
import SyncCore

/// `subsync reconcile`: recomputes accounts from their stored reports and compares, or repairs.
/// The rebuilt aggregates are resolved at the stored `resolved_at`, so time passing since is not
/// drift while everything persisted is still compared. What is compared, why a running pipeline
/// never shows as drift, and how a repair locks and writes: docs/OPERATIONS.md, "Reconciliation".
public struct Reconciler: Sendable {
    public let pool: ConnectionPool
    public let catalogue: Catalogue
    let engine: ResolutionEngine
    let clock: any ServiceClock
    let logger: Logger

    public init(
        pool: ConnectionPool,
        catalogue: Catalogue,
        clock: any ServiceClock = SystemClock(),
        logger: Logger = Logger(label: "subsync.reconcile")
    ) {
        self.pool = pool
        self.catalogue = catalogue
        self.clock = clock
        self.logger = logger
        self.engine = ResolutionEngine(pool: pool, catalogue: catalogue, clock: clock, logger: logger)
    }

    /// What reconciling one batch of accounts came to.
    public struct BatchResult: Sendable {
        public var accountsChecked = 0
        /// Every difference found (for a repair: found under the lock, just before repairing).
        public var differences: [Difference] = []
        /// Accounts with at least one difference.
        public var accountsWithDrift = 0
        /// Accounts re-resolved from their reports.
        public var accountsRepaired = 0
        /// Events the repair wrote (`origin = 'reconcile'`).
        public var eventsWritten = 0

        public init() {}
    }

    /// Checks `accounts` and, when `repair` is true, repairs those that drifted.
    public func reconcile(accounts: [String], repair: Bool) async throws -> BatchResult {
        var result = BatchResult()
        guard !accounts.isEmpty else { return result }
        result.accountsChecked = accounts.count
        let checked = try await pool.withTransaction(isolation: .repeatableRead) { connection in
            try await inspect(accounts, on: connection)
        }
        let drifted = accounts.filter { !(checked[$0]?.differences.isEmpty ?? true) }
        guard !drifted.isEmpty else { return result }
        guard repair else {
            result.accountsWithDrift = drifted.count
            result.differences = drifted.flatMap { checked[$0]?.differences ?? [] }
            return result
        }
        let repaired = try await withTransientRetries { try await self.repair(drifted) }
        result.accountsWithDrift = repaired.accounts
        result.accountsRepaired = repaired.accounts
        result.differences = repaired.differences
        result.eventsWritten = repaired.events
        return result
    }

    /// Re-checks `accounts` under the workers' locks and re-resolves the ones still drifted.
    private func repair(_ accounts: [String]) async throws -> (accounts: Int, differences: [Difference], events: Int) {
        try await pool.withTransaction { connection in
            let base = Resolver.resolve(transactions: [], catalogue: catalogue, now: clock.now())
            // Missing state rows first, in sorted order like the workers' placeholders, so
            // concurrent inserts cannot deadlock. Such a row restarts from the account's last
            // event: its counter (no sequence is reused) and its snapshot (what consumers know).
            try await connection.preparedQuery(
                """
                INSERT INTO account_states (account_id, tier, state, last_sequence, resolved_at)
                SELECT k.id, COALESCE(e.payload->'state'->>'tier', \(base.tier)),
                       COALESCE(e.payload->'state', \(try JSONParameter(base))::json), COALESCE(e.sequence, 0), '-infinity'
                FROM unnest(\(accounts)::text[]) AS k(id)
                LEFT JOIN LATERAL (
                    SELECT payload, sequence FROM events WHERE account_id = k.id ORDER BY sequence DESC LIMIT 1
                ) AS e ON true
                ORDER BY k.id
                ON CONFLICT (account_id) DO NOTHING
                """
            )
            _ = try await AccountLocks.lockExisting(accounts.sorted(), skipLocked: false, on: connection)
            let inspections = try await inspect(accounts, on: connection)
            let drifted = accounts.filter { !(inspections[$0]?.differences.isEmpty ?? true) }
            guard !drifted.isEmpty else { return (0, [], 0) }
            // A counter behind the events would make the next event collide with an old one.
            try await connection.preparedQuery(
                """
                UPDATE account_states AS s SET last_sequence = m.last
                FROM (SELECT account_id, max(sequence) AS last FROM events
                      WHERE account_id = ANY(\(drifted)::text[]) GROUP BY account_id) AS m
                WHERE s.account_id = m.account_id AND s.last_sequence < m.last
                """
            )
            var ledgers: [String: TransactionLedger] = [:]
            var counts: [String: [String: Int]] = [:]
            for accountID in drifted {
                guard let inspection = inspections[accountID] else { continue }
                ledgers[accountID] = inspection.ledger
                counts[accountID] = inspection.countsOfMissingTransactions
            }
            let unjustified = drifted.flatMap { accountID in (inspections[accountID]?.unjustifiedAllowances ?? []).map { (accountID, $0) } }
            if !unjustified.isEmpty {
                try await connection.preparedQuery(
                    """
                    DELETE FROM usage_entries AS u USING unnest(\(unjustified.map(\.0))::text[], \(unjustified.map(\.1))::text[]) AS d(a, id)
                    WHERE u.account_id = d.a AND u.entry_id = d.id AND u.kind = 'allowance'
                    """
                )
            }
            for accountID in drifted {
                guard let keys = inspections[accountID]?.driftedTotals, !keys.isEmpty else { continue }
                let rows = try await UsageTotals.rows(of: [accountID], on: connection)[accountID] ?? [:]
                let spans = UsageTotals.countedSpans(of: rows)
                let summed = try await UsageTotals.sums(of: accountID, spans: keys.compactMap { spans[$0] }, on: connection)
                try await UsageTotals.store(
                    keys.compactMap { key in spans[key].map { UsageTotals.StoredRow(key: key, sums: summed[$0] ?? UsageSums(), final: nil) } },
                    removing: [], of: accountID, on: connection)
            }
            let outcome = try await engine.resolve(
                accounts: drifted, replacingAggregatesWith: ledgers, reportCounts: counts, origin: .reconcile, on: connection)
            return (drifted.count, drifted.flatMap { inspections[$0]?.differences ?? [] }, outcome.eventsWritten)
        }
    }

    /// Retries `body` when it fails on a deadlock or serialization failure (contention with
    /// workers), which says nothing about the data.
    private func withTransientRetries<T>(_ body: () async throws -> T) async throws -> T {
        var attempt = 0
        while true {
            do {
                return try await body()
            } catch let error as PostgresError where attempt < 5 && (error.sqlState?.isTransient ?? false) && !error.isConnectionLoss {
                attempt += 1
                logger.notice("reconcile repair hit contention; retrying", metadata: ["error": "\(error)"])
                try await Task.sleep(for: .milliseconds(20 * attempt))
            }
        }
    }

    // MARK: - Inspection

    /// What reconciliation knows about one account after reading it.
    struct Inspection {
        var differences: [Difference] = []
        /// The aggregates rebuilt from the resolved reports.
        var ledger = TransactionLedger()
        /// Ids of recorded allowance rows the facts do not justify (removed by a repair).
        var unjustifiedAllowances: [String] = []
        /// Stored period totals that do not match their entries (summed again by a repair).
        var driftedTotals: [UsageTotals.StoredKey] = []
        /// Reports per rebuilt transaction that has no stored row (its `report_count`).
        var countsOfMissingTransactions: [String: Int] = [:]
    }

    /// A `transactions` row.
    private struct StoredTransaction {
        var columns: [(name: String, value: String?)]
        var aggregateText: String
    }

    /// An `account_states` row.
    private struct StoredState {
        var stateText: String
        var tier: String
        var nextTransitionAt: Date?
        var lastSequence: Int64
        var resolvedAt: Date
    }

    /// An `entitlements` row.
    private struct StoredEntitlement {
        var columns: [(name: String, value: String?)]
        var stateText: String
        /// Its `state` equals (as jsonb) the entitlement in `account_states.state`, which is
        /// compared anyway: then it need not be decoded (the common case, and a hot path).
        var equalsStateCopy: Bool
    }

    /// Reads `accounts` on `connection` and compares (see the type's documentation).
    func inspect(_ accounts: [String], on connection: Connection) async throws -> [String: Inspection] {
        var inspections: [String: Inspection] = [:]
        var reportCounts: [String: [String: Int]] = [:]
        for row in try await connection.preparedQuery(
            """
            SELECT account_id, \(unescaped: Report.columns) FROM reports
            WHERE account_id = ANY(\(accounts)::text[]) AND status = 'resolved'
            """
        ) {
            let accountID = try row.decode(String.self, at: 0)
            let report = try Report(row: row, offset: 1)
            inspections[accountID, default: Inspection()].ledger.add(report)
            reportCounts[accountID, default: [:]][report.transactionID, default: 0] += 1
        }

        var transactions: [String: [String: StoredTransaction]] = [:]
        for row in try await connection.preparedQuery(
            """
            SELECT account_id, transaction_id, original_transaction_id, product_id, expires_at,
                   grace_period_expires_at, revoked, is_upgraded, aggregate::text
            FROM transactions WHERE account_id = ANY(\(accounts)::text[])
            """
        ) {
            let columns: [(String, String?)] = [
                ("original_transaction_id", try row.decode(String.self, at: 2)),
                ("product_id", try row.decode(String.self, at: 3)),
                ("expires_at", FieldComparison.render(try row.decode(Date?.self, at: 4))),
                ("grace_period_expires_at", FieldComparison.render(try row.decode(Date?.self, at: 5))),
                ("revoked", String(try row.decode(Bool.self, at: 6))),
                ("is_upgraded", String(try row.decode(Bool.self, at: 7))),
            ]
            transactions[try row.decode(String.self, at: 0), default: [:]][try row.decode(String.self, at: 1)] =
                StoredTransaction(columns: columns, aggregateText: try row.decode(String.self, at: 8))
        }

        var states: [String: StoredState] = [:]
        for row in try await connection.preparedQuery(
            """
            SELECT account_id, state::text, tier, next_transition_at, last_sequence, resolved_at
            FROM account_states WHERE account_id = ANY(\(accounts)::text[])
            """
        ) {
            states[try row.decode(String.self, at: 0)] = StoredState(
                stateText: try row.decode(String.self, at: 1), tier: try row.decode(String.self, at: 2),
                nextTransitionAt: try row.decode(Date?.self, at: 3), lastSequence: try row.decode(Int64.self, at: 4),
                resolvedAt: try row.decode(Date.self, at: 5))
        }

        var entitlements: [String: [String: StoredEntitlement]] = [:]
        for row in try await connection.preparedQuery(
            """
            SELECT e.account_id, e.entitlement_id, e.status, e.expires_at, e.product_id, e.source_transaction_id,
                   e.will_renew, e.state::text,
                   COALESCE(e.state::jsonb = ANY(ARRAY(SELECT jsonb_array_elements(s.state::jsonb->'entitlements'))), false)
            FROM entitlements e LEFT JOIN account_states s ON s.account_id = e.account_id
            WHERE e.account_id = ANY(\(accounts)::text[])
            """
        ) {
            let columns: [(String, String?)] = [
                ("status", try row.decode(String.self, at: 2)),
                ("expires_at", FieldComparison.render(try row.decode(Date?.self, at: 3))),
                ("product_id", try row.decode(String?.self, at: 4)),
                ("source_transaction_id", try row.decode(String?.self, at: 5)),
                ("will_renew", try row.decode(Bool?.self, at: 6).map { String($0) }),
            ]
            entitlements[try row.decode(String.self, at: 0), default: [:]][try row.decode(String.self, at: 1)] =
                StoredEntitlement(
                    columns: columns, stateText: try row.decode(String.self, at: 7), equalsStateCopy: try row.decode(Bool.self, at: 8))
        }

        var lastEvents: [String: Int64] = [:]
        for row in try await connection.preparedQuery(
            "SELECT account_id, max(sequence) FROM events WHERE account_id = ANY(\(accounts)::text[]) GROUP BY account_id"
        ) {
            lastEvents[try row.decode(String.self, at: 0)] = try row.decode(Int64.self, at: 1)
        }

        let storedCredits = try await UsageLedger.storedCreditEntries(of: accounts, on: connection)
        let storedAllowances = try await Self.storedAllowances(of: accounts, on: connection)
        let storedTotals = try await UsageTotals.rows(of: accounts, on: connection)
        let decoder = JSONDecoder.postgres
        let now = clock.now()
        let timelineStarts = storedAllowances.isEmpty ? [:] : try await UsageLedger.timelineStarts(of: accounts, now: now, on: connection)
        for accountID in accounts {
            var inspection = inspections[accountID] ?? Inspection()
            var differences: [Difference] = []
            let storedTransactions = transactions[accountID] ?? [:]
            compareTransactions(
                accountID: accountID, stored: storedTransactions, rebuilt: inspection.ledger, decoder: decoder,
                into: &differences)
            for aggregate in inspection.ledger.unorderedAggregates where storedTransactions[aggregate.transactionID] == nil {
                inspection.countsOfMissingTransactions[aggregate.transactionID] = reportCounts[accountID]?[aggregate.transactionID] ?? 0
            }

            let storedState = states[accountID]
            let storedEntitlements = entitlements[accountID] ?? [:]
            if let storedState, storedState.resolvedAt != .distantPast {
                let expected = Resolver.resolve(ledger: inspection.ledger, catalogue: catalogue, now: storedState.resolvedAt)
                compareState(
                    accountID: accountID, stored: storedState, storedEntitlements: storedEntitlements, expected: expected,
                    lastEvent: lastEvents[accountID], decoder: decoder, into: &differences)
            } else if inspection.ledger.count > 0 || !storedTransactions.isEmpty || !storedEntitlements.isEmpty {
                // No state (or only a repair's placeholder): the account was resolved once, its
                // state row is gone.
                let expected = Resolver.resolve(ledger: inspection.ledger, catalogue: catalogue, now: now)
                differences.append(Difference(accountID: accountID, scope: .account, field: "row", stored: nil, recomputed: expected.tier))
            }
            // Usage entries that follow from the transactions (consumables' credits and refunds).
            // A refund reversed, a purchase refunded again or one that came back since its entries
            // were written needs one more (`creditCorrections`): the stored units do not net to
            // the purchase's state.
            let aggregates = inspection.ledger.unorderedAggregates
            let derived = UsageDerivation.entries(transactions: aggregates, catalogue: catalogue)
                + UsageDerivation.creditCorrections(transactions: aggregates, catalogue: catalogue, stored: storedCredits[accountID] ?? [:], now: now)
            for entry in derived where entry.kind != .allowance && storedCredits[accountID]?[entry.meter]?.contains(entry.id) != true {
                differences.append(Difference(
                    accountID: accountID, scope: .usage, transactionID: UsageDerivation.transactionID(ofCreditEntry: entry.id),
                    field: "usage_entries.row", stored: nil, recomputed: "\(entry.kind.rawValue) \(entry.units ?? 0) \(entry.meter)"))
            }
            // Allowance rows recorded by earlier versions that the facts do not justify: a period or
            // tier the timeline the balance uses does not have (an allowance written as the account
            // was known when usage arrived). Nothing reads them any more; repair removes them.
            if let recorded = storedAllowances[accountID], !recorded.isEmpty {
                let start = timelineStarts[accountID] ?? now
                let justified = Set(catalogue.meters.flatMap { meter in
                    UsageTimeline.periods(
                        meter: meter, catalogue: catalogue, transactions: aggregates, from: start, through: now,
                        after: UsageTotals.finalPeriods(of: meter.id, in: storedTotals[accountID] ?? [:]))
                        .map { AllowanceKey(meter: meter.id, start: $0.period.start, end: $0.period.end, units: $0.allowance) }
                })
                for entry in recorded.sorted(by: { ($0.meter, $0.at, $0.id) < ($1.meter, $1.at, $1.id) }) {
                    let units: LimitValue = entry.units.map { .limited($0) } ?? .unlimited
                    guard let end = entry.periodEnd,
                        !justified.contains(AllowanceKey(meter: entry.meter, start: entry.at, end: end, units: units))
                    else { continue }
                    inspection.unjustifiedAllowances.append(entry.id)
                    differences.append(Difference(
                        accountID: accountID, scope: .usage, field: "usage_entries.allowance",
                        stored: "\(entry.id) \(entry.units.map(String.init) ?? "unlimited")", recomputed: nil))
                }
            }
            // Stored period totals (usage_totals) against the entries they sum (where the entries
            // count; the first final row of a meter also holds those before it).
            if let rows = storedTotals[accountID], !rows.isEmpty {
                let spans = UsageTotals.countedSpans(of: rows)
                let summed = try await UsageTotals.sums(of: accountID, spans: Array(spans.values), on: connection)
                for (key, row) in rows.sorted(by: { ($0.key.meter, $0.key.start) < ($1.key.meter, $1.key.start) }) {
                    var recomputed = spans[key].flatMap { summed[$0] } ?? UsageSums()
                    // A period made final before sql/0042 holds its transfers among the debits,
                    // as it was billed then (docs/ARCHITECTURE.md, "How the usage ledger is stored").
                    if row.final != nil, row.sums.transfers == 0 { recomputed = recomputed.transfersAsDebits }
                    guard recomputed != row.sums else { continue }
                    inspection.driftedTotals.append(key)
                    differences.append(Difference(
                        accountID: accountID, scope: .usage, field: "usage_totals.\(key.meter).\(RFC3339.format(key.start))",
                        stored: Self.describe(row.sums), recomputed: Self.describe(recomputed)))
                }
            }
            inspection.differences = differences
            inspections[accountID] = inspection
        }
        return inspections
    }

    static func describe(_ sums: UsageSums) -> String {
        "used \(sums.used) rewards \(sums.rewards) credits \(sums.credits) debits \(sums.debits) transfers \(sums.transfers) entries \(sums.entries)"
    }

    /// An allowance period as reconcile compares it: the meter, the period and its units.
    private struct AllowanceKey: Hashable {
        var meter: String
        var start: Date
        var end: Date
        var units: LimitValue
    }

    /// The allowance rows earlier versions recorded in `usage_entries`, per account.
    static func storedAllowances(of accounts: [String], on connection: Connection) async throws -> [String: [UsageEntry]] {
        var stored: [String: [UsageEntry]] = [:]
        for row in try await connection.preparedQuery(
            """
            SELECT entry_id, meter, kind, units, at, period_end, account_id FROM usage_entries
            WHERE account_id = ANY(\(accounts)::text[]) AND kind = 'allowance'
            """
        ) {
            stored[try row.decode(String.self, at: 6), default: []].append(try UsageLedger.entry(row))
        }
        return stored
    }

    private func compareTransactions(
        accountID: String, stored: [String: StoredTransaction], rebuilt: TransactionLedger, decoder: JSONDecoder,
        into differences: inout [Difference]
    ) {
        let ids = Set(stored.keys).union(rebuilt.unorderedAggregates.map(\.transactionID)).sorted()
        for id in ids {
            func add(_ field: String, _ before: String?, _ after: String?) {
                differences.append(Difference(accountID: accountID, scope: .transaction, transactionID: id, field: field, stored: before, recomputed: after))
            }
            switch (stored[id], rebuilt[id]) {
            case (nil, nil):
                continue
            case (nil, .some(let aggregate)):
                add("row", nil, aggregate.productID)
            case (.some(let row), nil):
                add("row", row.columns.first { $0.name == "product_id" }?.value ?? "present", nil)
            case (.some(let row), .some(let aggregate)):
                let storedAggregate = try? decoder.decode(TransactionAggregate.self, from: Data(row.aggregateText.utf8))
                if let storedAggregate {
                    if storedAggregate != aggregate, let before = try? FieldComparison.object(storedAggregate),
                        let after = try? FieldComparison.object(aggregate)
                    {
                        for field in FieldComparison.differences(stored: before, recomputed: after) {
                            add(field.key, field.stored, field.recomputed)
                        }
                    }
                } else {
                    add("aggregate", "unreadable: \(row.aggregateText.prefix(200))", "present")
                }
                let fromJSON = storedAggregate.map(Self.columnValues)
                let expected = Self.columnValues(aggregate)
                for (index, column) in row.columns.enumerated() {
                    let after = expected[index].value
                    guard column.value != after, column.value != fromJSON?[index].value else { continue }
                    add("transactions.\(column.name)", column.value, after)
                }
            }
        }
    }

    /// The values `transactions`' column copies should hold for `aggregate`, in column order.
    private static func columnValues(_ aggregate: TransactionAggregate) -> [(name: String, value: String?)] {
        [
            ("original_transaction_id", aggregate.originalTransactionID),
            ("product_id", aggregate.productID),
            ("expires_at", FieldComparison.render(aggregate.expiresAt)),
            ("grace_period_expires_at", FieldComparison.render(aggregate.gracePeriodExpiresAt)),
            ("revoked", String(aggregate.isRevoked)),
            ("is_upgraded", String(aggregate.isUpgraded)),
        ]
    }

    /// The values `entitlements`' column copies should hold for `state`, in column order.
    private static func columnValues(_ state: EntitlementState) -> [(name: String, value: String?)] {
        [
            ("status", state.status.rawValue),
            ("expires_at", FieldComparison.render(state.expiresAt)),
            ("product_id", state.productID),
            ("source_transaction_id", state.sourceTransactionID),
            ("will_renew", String(state.willRenew)),
        ]
    }

    private func compareState(
        accountID: String, stored: StoredState, storedEntitlements: [String: StoredEntitlement], expected: AccountState,
        lastEvent: Int64?, decoder: JSONDecoder, into differences: inout [Difference]
    ) {
        func add(_ scope: Difference.Scope, _ entitlementID: String?, _ field: String, _ before: String?, _ after: String?) {
            differences.append(Difference(accountID: accountID, scope: scope, entitlementID: entitlementID, field: field, stored: before, recomputed: after))
        }
        let storedState = try? decoder.decode(AccountState.self, from: Data(stored.stateText.utf8))
        if let storedState {
            if !Self.same(storedState, expected), let before = try? FieldComparison.object(storedState),
                let after = try? FieldComparison.object(expected)
            {
                for field in FieldComparison.differences(stored: before, recomputed: after, ignoring: ["entitlements"]) {
                    add(.account, nil, field.key, field.stored, field.recomputed)
                }
                let ids = Set(storedState.entitlements.map(\.id)).union(expected.entitlements.map(\.id)).sorted()
                for id in ids {
                    switch (storedState.entitlement(id), expected.entitlement(id)) {
                    case (nil, nil):
                        continue
                    case (nil, .some(let after)):
                        add(.entitlement, id, "entitlement", nil, after.status.rawValue)
                    case (.some(let before), nil):
                        add(.entitlement, id, "entitlement", before.status.rawValue, nil)
                    case (.some(let before), .some(let after)):
                        guard !Self.same(before, after), let b = try? FieldComparison.object(before),
                            let a = try? FieldComparison.object(after)
                        else { continue }
                        // `is_active` follows `status`: one wrong status is one difference.
                        for field in FieldComparison.differences(stored: b, recomputed: a, ignoring: ["is_active"]) {
                            add(.entitlement, id, field.key, field.stored, field.recomputed)
                        }
                    }
                }
            }
        } else {
            add(.account, nil, "state", "unreadable: \(stored.stateText.prefix(200))", expected.tier)
        }
        if stored.tier != expected.tier, stored.tier != storedState?.tier {
            add(.account, nil, "account_states.tier", stored.tier, expected.tier)
        }
        let nextColumn = FieldComparison.render(stored.nextTransitionAt)
        let nextExpected = FieldComparison.render(expected.nextTransitionAt)
        if nextColumn != nextExpected, nextColumn != FieldComparison.render(storedState?.nextTransitionAt) {
            add(.account, nil, "account_states.next_transition_at", nextColumn, nextExpected)
        }
        if let lastEvent, stored.lastSequence < lastEvent {
            add(.account, nil, "account_states.last_sequence", String(stored.lastSequence), String(lastEvent))
        }

        // The `entitlements` rows: copies of the state's entitlements, for queries.
        let ids = Set(storedEntitlements.keys).union(expected.entitlements.map(\.id)).sorted()
        for id in ids {
            let inState = storedState?.entitlement(id)
            switch (storedEntitlements[id], expected.entitlement(id)) {
            case (nil, nil):
                continue
            case (nil, .some(let after)):
                add(.entitlement, id, "entitlements.row", nil, after.status.rawValue)
            case (.some(let row), nil):
                add(.entitlement, id, "entitlements.row", row.columns.first?.value ?? "present", nil)
            case (.some(let row), .some(let after)):
                let fromState = inState.map(Self.columnValues)
                let expectedColumns = Self.columnValues(after)
                for (index, column) in row.columns.enumerated() {
                    let value = expectedColumns[index].value
                    guard column.value != value, column.value != fromState?[index].value else { continue }
                    add(.entitlement, id, "entitlements.\(column.name)", column.value, value)
                }
                guard !row.equalsStateCopy || inState == nil else { continue }
                let rowState = try? decoder.decode(EntitlementState.self, from: Data(row.stateText.utf8))
                let matchesExpected = rowState.map { Self.same($0, after) } ?? false
                let matchesState = rowState.flatMap { state in inState.map { Self.same(state, $0) } } ?? false
                if !matchesExpected && !matchesState {
                    add(.entitlement, id, "entitlements.state", row.stateText, (try? JSONParameter(after))?.text)
                }
            }
        }
    }

    /// Equal, or equal once written as JSON (the persisted form: dates to the microsecond).
    private static func same<T: Encodable & Equatable>(_ a: T, _ b: T) -> Bool {
        if a == b { return true }
        guard let left = try? JSONParameter(a), let right = try? JSONParameter(b) else { return false }
        return left.text == right.text
    }
}
