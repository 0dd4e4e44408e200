import Foundation
import Postgres
import SyncCore

/// Balances from stored per-period totals (`usage_totals`, sql/0036; docs/USAGE.md "Cost"): a
/// balance, a write, a hold or a read costs the same at 100 and at 100,000 entries.
///
/// A row holds the ``UsageSums`` of one account's recorded entries of one meter in `[start, end)`.
/// The invariant: **every row equals the sums of the entries in its span**, whichever period of
/// the timeline it is (a row of a period that a late report moved stays exact, and is only
/// removed for tidiness). It holds because
/// - a row is created from the entries themselves (``balances(of:meter:catalogue:now:storing:on:)``
///   with `storing`, which its callers run under the account's row lock);
/// - every insert of entries adds them to every row whose span contains them, in the inserting
///   transaction (``add(_:on:)``), and every writer of `usage_entries` holds the account's lock;
/// - entries are never updated, and only allowance rows (not counted) are ever deleted.
/// Readers without the lock read the rows and sum what is missing from the entries, storing
/// nothing (a row stored outside the lock could miss a concurrent insert).
///
/// **Final periods** (sql/0037, docs/USAGE.md "Final periods"): a row whose period ended
/// ``UsagePolicy/finalAfter`` ago is marked `final` with its allowance and tier, under the lock,
/// by the first balance stored after that. A final row is the period as it stands for good: the
/// timeline is derived only from the end of the last final row on, and an entry written later
/// that is dated inside a final period counts at that end (`counted_at`), in the first open
/// period. Entries are summed by where they count (`counted_at`, else `at`); the first final row
/// of a meter also holds the entries counted before it (grants before the first period), so the
/// final rows together hold every entry counted before the end of the last.
enum UsageTotals {
    /// Adds `inserted` (entries just written, per account) to the stored rows where they count:
    /// at their `at`, or, dated inside a final period, at the end of the last final period (their
    /// `counted_at` is set to it here, in the inserting transaction).
    static func add(_ inserted: [(accountID: String, entry: UsageEntry)], on connection: Connection) async throws {
        let counted = inserted.filter { $0.entry.kind != .allowance }
        guard !counted.isEmpty else { return }
        for (accountID, entries) in Dictionary(grouping: counted, by: \.accountID) {
            let boundaries = try await finalBoundaries(of: accountID, on: connection)
            var meters: [String] = []
            var times: [Date] = []
            var sums: [UsageSums] = []
            var moved: [(meter: String, id: String, at: Date)] = []
            for (_, entry) in entries {
                var one = UsageSums()
                one.add(entry)
                meters.append(entry.meter)
                if let boundary = boundaries[entry.meter], entry.at.roundedToMicroseconds < boundary {
                    times.append(boundary)
                    moved.append((entry.meter, entry.id, boundary))
                } else {
                    times.append(entry.at)
                }
                sums.append(one)
            }
            if !moved.isEmpty {
                try await connection.preparedQuery(
                    """
                    UPDATE usage_entries u SET counted_at = m.c
                    FROM unnest(\(moved.map(\.meter))::text[], \(moved.map(\.id))::text[], \(moved.map(\.at))::timestamptz[]) AS m(meter, id, c)
                    WHERE u.account_id = \(accountID) AND u.meter = m.meter AND u.entry_id = m.id
                    """
                )
            }
            // One statement per account: a router query on Citus (distributed by account_id).
            try await connection.preparedQuery(
                """
                WITH d AS (
                    SELECT * FROM unnest(
                        \(meters)::text[], \(times)::timestamptz[], \(sums.map { Int64($0.used) })::bigint[],
                        \(sums.map { Int64($0.rewards) })::bigint[], \(sums.map { Int64($0.credits) })::bigint[],
                        \(sums.map { Int64($0.debits) })::bigint[], \(sums.map { Int64($0.transfers) })::bigint[]) AS d(m, at, u, r, c, b, x)
                ), per_row AS (
                    SELECT t.meter, t.period_start, t.period_end, sum(d.u) AS u, sum(d.r) AS r, sum(d.c) AS c,
                           sum(d.b) AS b, sum(d.x) AS x, count(*) AS n
                    FROM usage_totals t JOIN d ON t.meter = d.m AND d.at >= t.period_start AND d.at < t.period_end
                    WHERE t.account_id = \(accountID)
                    GROUP BY t.meter, t.period_start, t.period_end
                )
                UPDATE usage_totals t
                SET used = t.used + p.u, rewards = t.rewards + p.r, credits = t.credits + p.c, debits = t.debits + p.b,
                    transfers = t.transfers + p.x, entries = t.entries + p.n
                FROM per_row p
                WHERE t.account_id = \(accountID) AND t.meter = p.meter AND t.period_start = p.period_start AND t.period_end = p.period_end
                """
            )
        }
    }

    /// Per account, the balance of every meter of `catalogue` (of `meter`, when given) at `now`:
    /// the final periods as stored, then the allowance periods ``UsageTimeline`` derives from the
    /// account's transactions after them, each with the sums of its entries (its stored row, or
    /// summed from the entries when it has none), and the entries outside every period (summed on
    /// the spot; the first-contact rule keeps them few).
    ///
    /// `storing`: the caller holds the accounts' row locks; the rows of periods that had none are
    /// stored, periods that became final are marked so, and rows of periods the timeline no
    /// longer has are removed.
    static func balances(
        of accountIDs: [String], meter: String?, catalogue: Catalogue, now: Date, storing: Bool, on connection: Connection
    ) async throws -> [String: [UsageBalance]] {
        let metered = meter.map { id in catalogue.meters.filter { $0.id == id } } ?? catalogue.meters
        guard !accountIDs.isEmpty, !metered.isEmpty else { return [:] }
        let accounts = Array(Set(accountIDs)).sorted()
        let transactions = try await UsageLedger.transactionLedgers(of: accounts, on: connection)
        let starts = try await UsageLedger.timelineStarts(of: accounts, now: now, on: connection)
        let stored = try await rows(of: accounts, meter: meter, on: connection)

        var balances: [String: [UsageBalance]] = [:]
        for accountID in accounts {
            let start = starts[accountID] ?? now
            let aggregates = transactions[accountID]?.unorderedAggregates ?? []
            let rows = stored[accountID] ?? [:]
            var timelines: [(meter: Meter, periods: [UsageTimeline.Period], final: Int)] = []
            // The spans summed from the entries: periods without a row, and before (while no
            // period is final) and after every period.
            var spans: [StoredKey] = []
            for meter in metered {
                let final = finalPeriods(of: meter.id, in: rows)
                let periods = UsageTimeline.periods(
                    meter: meter, catalogue: catalogue, transactions: aggregates, from: start, through: now, after: final)
                timelines.append((meter, periods, final.count))
                for period in periods where rows[StoredKey(meter: meter.id, period.period)] == nil {
                    spans.append(StoredKey(meter: meter.id, period.period))
                }
                if let first = periods.first?.period.start, let last = periods.last?.period.end {
                    if final.isEmpty { spans.append(StoredKey(meter: meter.id, start: .distantPast, end: first)) }
                    spans.append(StoredKey(meter: meter.id, start: last, end: .distantFuture))
                }
            }
            let summed = try await sums(of: accountID, spans: spans, on: connection)
            func periodSums(_ meter: Meter, _ period: UsageTimeline.Period) -> UsageSums {
                let key = StoredKey(meter: meter.id, period.period)
                return rows[key]?.sums ?? summed[key] ?? UsageSums()
            }
            func before(_ meter: Meter, _ periods: [UsageTimeline.Period]) -> UsageSums {
                guard let first = periods.first else { return UsageSums() }
                return summed[StoredKey(meter: meter.id, start: .distantPast, end: first.period.start)] ?? UsageSums()
            }
            if storing {
                var new: [StoredRow] = []
                var kept: Set<StoredKey> = []
                for (meter, periods, finalCount) in timelines {
                    for (index, period) in periods.enumerated() {
                        let key = StoredKey(meter: meter.id, period.period)
                        kept.insert(key)
                        guard index >= finalCount else { continue }
                        // Periods are end to end: those that became final are the first open ones.
                        if UsagePolicy.isFinal(period.period, at: now) {
                            // The first final row of a meter holds what counts before it too.
                            var total = periodSums(meter, period)
                            if index == 0 { total = total + before(meter, periods) }
                            new.append(StoredRow(key: key, sums: total, final: period))
                        } else if rows[key] == nil {
                            new.append(StoredRow(key: key, sums: summed[key] ?? UsageSums(), final: nil))
                        }
                    }
                }
                let gone = rows.filter { !kept.contains($0.key) && $0.value.final == nil }.map(\.key)
                try await store(new, removing: gone, of: accountID, on: connection)
            }
            for (meter, periods, finalCount) in timelines {
                guard let last = periods.last else { continue }
                let timeline = periods.map { UsageBalance.PeriodSums(period: $0.period, allowance: $0.allowance, sums: periodSums(meter, $0)) }
                balances[accountID, default: []].append(UsageBalance.settle(
                    meter: meter.id, timeline: timeline, before: finalCount == 0 ? before(meter, periods) : UsageSums(),
                    after: summed[StoredKey(meter: meter.id, start: last.period.end, end: .distantFuture)] ?? UsageSums(), now: now))
            }
        }
        return balances
    }

    /// The final periods of `meter` among an account's stored rows, in order.
    static func finalPeriods(of meter: String, in rows: [StoredKey: Stored]) -> [UsageTimeline.Period] {
        rows.compactMap { $0.key.meter == meter ? $0.value.final : nil }.sorted { $0.period < $1.period }
    }

    /// Per meter, the end of `accountID`'s last final period: entries dated before it count there.
    static func finalBoundaries(of accountID: String, on connection: Connection) async throws -> [String: Date] {
        var boundaries: [String: Date] = [:]
        for row in try await connection.preparedQuery(
            "SELECT meter, max(period_end) FROM usage_totals WHERE account_id = \(accountID) AND final GROUP BY meter"
        ) {
            boundaries[try row.decode(String.self, at: 0)] = try row.decode(Date.self, at: 1)
        }
        return boundaries
    }

    /// The span of a stored row's entries: its period, or from the beginning of time for the
    /// first final row of its meter (which holds what counts before it).
    static func countedSpans(of rows: [StoredKey: Stored]) -> [StoredKey: StoredKey] {
        var firstFinal: [String: StoredKey] = [:]
        for (key, row) in rows where row.final != nil {
            if let first = firstFinal[key.meter], first.start <= key.start { continue }
            firstFinal[key.meter] = key
        }
        return Dictionary(uniqueKeysWithValues: rows.keys.map { key in
            (key, firstFinal[key.meter] == key ? StoredKey(meter: key.meter, start: .distantPast, end: key.end) : key)
        })
    }

    /// A stored row: the sums of its entries and, for a final period, the period as it stood
    /// when it became final.
    struct Stored: Equatable {
        var sums: UsageSums
        var final: UsageTimeline.Period?
    }

    /// A row to store.
    struct StoredRow {
        var key: StoredKey
        var sums: UsageSums
        /// Set: the row becomes final with this allowance and tier.
        var final: UsageTimeline.Period?
    }

    /// The stored rows of `accounts` (of `meter`, when given).
    static func rows(of accounts: [String], meter: String? = nil, on connection: Connection) async throws -> [String: [StoredKey: Stored]] {
        var stored: [String: [StoredKey: Stored]] = [:]
        for row in try await connection.preparedQuery(
            """
            SELECT account_id, meter, period_start, period_end, used, rewards, credits, debits, transfers, entries, final, allowance, tier
            FROM usage_totals
            WHERE account_id = ANY(\(accounts)::text[]) AND (\(meter)::text IS NULL OR meter = \(meter))
            """
        ) {
            let key = StoredKey(meter: try row.decode(String.self, at: 1), start: try row.decode(Date.self, at: 2), end: try row.decode(Date.self, at: 3))
            var final: UsageTimeline.Period?
            if try row.decode(Bool.self, at: 10) {
                let allowance: LimitValue = try row.decode(Int64?.self, at: 11).map { .limited(Int($0)) } ?? .unlimited
                final = UsageTimeline.Period(
                    period: UsagePeriod(start: key.start, end: key.end), tier: try row.decode(String?.self, at: 12) ?? "", allowance: allowance)
            }
            stored[try row.decode(String.self, at: 0), default: [:]][key] = Stored(sums: try sums(row, from: 4), final: final)
        }
        return stored
    }

    /// The six sums of a row, in the columns from `column` on: used, rewards, credits, debits,
    /// transfers, entries.
    static func sums(_ row: Row, from column: Int) throws -> UsageSums {
        UsageSums(
            used: Int(try row.decode(Int64.self, at: column)), rewards: Int(try row.decode(Int64.self, at: column + 1)),
            credits: Int(try row.decode(Int64.self, at: column + 2)), debits: Int(try row.decode(Int64.self, at: column + 3)),
            transfers: Int(try row.decode(Int64.self, at: column + 4)), entries: Int(try row.decode(Int64.self, at: column + 5)))
    }

    /// A stored row's identity after the account: meter and span.
    struct StoredKey: Hashable {
        var meter: String
        var start: Date
        var end: Date

        /// Times as `timestamptz` keeps them (microseconds), so a derived period finds its row.
        init(meter: String, start: Date, end: Date) {
            self.meter = meter
            self.start = start == .distantPast || start == .distantFuture ? start : start.roundedToMicroseconds
            self.end = end == .distantPast || end == .distantFuture ? end : end.roundedToMicroseconds
        }

        init(meter: String, _ period: UsagePeriod) {
            self.init(meter: meter, start: period.start, end: period.end)
        }
    }

    /// The sums of `accountID`'s recorded entries counted in each of `spans` (at their
    /// `counted_at`, else their `at`), from the entries (one statement, a single-shard one on
    /// Citus). The two ways an entry is counted are two index range scans, `usage_entries_by_time`
    /// for `at` and `usage_entries_counted` for `counted_at`, so only the entries in the spans are
    /// read: one condition with an `OR` of the two read every entry of the account's meter, which
    /// made every request's cost grow with the ledger (15× at 100,000 entries; scripts/bench/usage).
    /// A span without entries has no row: zero.
    static func sums(of accountID: String, spans: [StoredKey], on connection: Connection) async throws -> [StoredKey: UsageSums] {
        guard !spans.isEmpty else { return [:] }
        let rows = try await connection.preparedQuery(
            """
            SELECT p.i,
                   COALESCE(sum(GREATEST(u.units, 0)) FILTER (WHERE u.kind = 'usage'), 0)::bigint,
                   COALESCE(sum(GREATEST(u.units, 0)) FILTER (WHERE u.kind = 'reward'), 0)::bigint,
                   COALESCE(sum(GREATEST(u.units, 0)) FILTER (
                       WHERE u.kind IN ('credit', 'credit_restored') OR (u.kind = 'adjustment' AND u.units >= 0)), 0)::bigint,
                   COALESCE(sum(abs(u.units)) FILTER (
                       WHERE (u.kind = 'credit_revoked' AND NOT starts_with(u.entry_id, \(UsageEntry.transferPrefix)))
                          OR (u.kind = 'adjustment' AND u.units < 0)), 0)::bigint,
                   COALESCE(sum(abs(u.units)) FILTER (
                       WHERE u.kind = 'credit_revoked' AND starts_with(u.entry_id, \(UsageEntry.transferPrefix))), 0)::bigint,
                   count(u.entry_id)::bigint
            FROM unnest(\(spans.map(\.meter))::text[], \(spans.map(\.start))::timestamptz[], \(spans.map(\.end))::timestamptz[])
                     WITH ORDINALITY AS p(m, s, e, i)
            CROSS JOIN LATERAL (
                SELECT e.kind, e.units, e.entry_id FROM usage_entries e
                WHERE e.account_id = \(accountID) AND e.meter = p.m AND e.kind <> 'allowance'
                  AND e.counted_at IS NULL AND e.at >= p.s AND e.at < p.e
                UNION ALL
                SELECT e.kind, e.units, e.entry_id FROM usage_entries e
                WHERE e.account_id = \(accountID) AND e.meter = p.m AND e.kind <> 'allowance'
                  AND e.counted_at >= p.s AND e.counted_at < p.e
            ) u
            GROUP BY p.i
            """
        )
        var sums: [StoredKey: UsageSums] = [:]
        for row in rows {
            let index = Int(try row.decode(Int64.self, at: 0)) - 1
            guard spans.indices.contains(index) else { continue }
            sums[spans[index]] = try Self.sums(row, from: 1)
        }
        return sums
    }

    /// Stores `rows` (summed from the entries under the account's lock; a final one with its
    /// allowance and tier) and removes the rows of spans the timeline no longer has.
    static func store(_ rows: [StoredRow], removing gone: [StoredKey], of accountID: String, on connection: Connection) async throws {
        if !gone.isEmpty {
            try await connection.preparedQuery(
                """
                DELETE FROM usage_totals t
                USING unnest(\(gone.map(\.meter))::text[], \(gone.map(\.start))::timestamptz[], \(gone.map(\.end))::timestamptz[]) AS g(m, s, e)
                WHERE t.account_id = \(accountID) AND t.meter = g.m AND t.period_start = g.s AND t.period_end = g.e AND NOT t.final
                """
            )
        }
        guard !rows.isEmpty else { return }
        let allowances: [Int64?] = rows.map { row in
            switch row.final?.allowance {
            case .limited(let units): Int64(units)
            case .unlimited, nil: nil
            }
        }
        try await connection.preparedQuery(
            """
            INSERT INTO usage_totals (account_id, meter, period_start, period_end, used, rewards, credits, debits, transfers, entries, final, allowance, tier)
            SELECT \(accountID), m, s, e, u, r, c, b, x, n, f, a, t FROM unnest(
                \(rows.map(\.key.meter))::text[], \(rows.map(\.key.start))::timestamptz[], \(rows.map(\.key.end))::timestamptz[],
                \(rows.map { Int64($0.sums.used) })::bigint[], \(rows.map { Int64($0.sums.rewards) })::bigint[],
                \(rows.map { Int64($0.sums.credits) })::bigint[], \(rows.map { Int64($0.sums.debits) })::bigint[],
                \(rows.map { Int64($0.sums.transfers) })::bigint[],
                \(rows.map { Int64($0.sums.entries) })::bigint[], \(rows.map { $0.final != nil })::boolean[], \(allowances)::bigint[],
                \(rows.map { $0.final?.tier })::text[]) AS v(m, s, e, u, r, c, b, x, n, f, a, t)
            ON CONFLICT (account_id, meter, period_start, period_end) DO UPDATE SET
                used = EXCLUDED.used, rewards = EXCLUDED.rewards, credits = EXCLUDED.credits, debits = EXCLUDED.debits,
                transfers = EXCLUDED.transfers,
                entries = EXCLUDED.entries, final = usage_totals.final OR EXCLUDED.final,
                allowance = CASE WHEN usage_totals.final THEN usage_totals.allowance ELSE EXCLUDED.allowance END,
                tier = CASE WHEN usage_totals.final THEN usage_totals.tier ELSE EXCLUDED.tier END
            """
        )
    }
}
