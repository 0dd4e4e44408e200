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
enum UsageTotals {
    /// Adds `inserted` (entries just written, per account) to the stored rows that contain them.
    static func add(_ inserted: [(accountID: String, entry: UsageEntry)], on connection: Connection) async throws {
        let counted = inserted.filter { $0.entry.kind != .allowance }
        guard !counted.isEmpty else { return }
        for (accountID, entries) in Dictionary(grouping: counted, by: \.accountID) {
            var meters: [String] = []
            var times: [Date] = []
            var sums: [UsageSums] = []
            for (_, entry) in entries {
                var one = UsageSums()
                one.add(entry)
                meters.append(entry.meter)
                times.append(entry.at)
                sums.append(one)
            }
            // One statement per account: a router query on Citus (distributed by account_id).
            try await connection.preparedQuery(
                """
                WITH d AS (
                    SELECT * FROM unnest(
                        \(meters)::text[], \(times)::timestamptz[], \(sums.map { Int64($0.used) })::bigint[],
                        \(sums.map { Int64($0.rewards) })::bigint[], \(sums.map { Int64($0.credits) })::bigint[],
                        \(sums.map { Int64($0.debits) })::bigint[]) AS d(m, at, u, r, c, b)
                ), per_row AS (
                    SELECT t.meter, t.period_start, t.period_end, sum(d.u) AS u, sum(d.r) AS r, sum(d.c) AS c,
                           sum(d.b) AS b, count(*) AS n
                    FROM usage_totals t JOIN d ON t.meter = d.m AND d.at >= t.period_start AND d.at < t.period_end
                    WHERE t.account_id = \(accountID)
                    GROUP BY t.meter, t.period_start, t.period_end
                )
                UPDATE usage_totals t
                SET used = t.used + p.u, rewards = t.rewards + p.r, credits = t.credits + p.c, debits = t.debits + p.b,
                    entries = t.entries + p.n
                FROM per_row p
                WHERE t.account_id = \(accountID) AND t.meter = p.meter AND t.period_start = p.period_start AND t.period_end = p.period_end
                """
            )
        }
    }

    /// Per account, the balance of every meter of `catalogue` (of `meter`, when given) at `now`:
    /// the allowance periods ``UsageTimeline`` derives from the account's transactions, each with
    /// the sums of its entries (its stored row, or summed from the entries when it has none), and
    /// the entries outside every period (summed on the spot; the first-contact rule keeps them few).
    ///
    /// `storing`: the caller holds the accounts' row locks; the rows of periods that had none are
    /// stored, and rows of periods the timeline no longer has are removed.
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
            var timelines: [(meter: Meter, periods: [UsageTimeline.Period])] = []
            // The spans summed from the entries: periods without a row, and before and after
            // every period.
            var spans: [StoredKey] = []
            for meter in metered {
                let periods = UsageTimeline.periods(meter: meter, catalogue: catalogue, transactions: aggregates, from: start, through: now)
                timelines.append((meter, periods))
                for period in periods where stored[accountID]?[StoredKey(meter: meter.id, period.period)] == nil {
                    spans.append(StoredKey(meter: meter.id, period.period))
                }
                if let first = periods.first?.period.start, let last = periods.last?.period.end {
                    spans.append(StoredKey(meter: meter.id, start: .distantPast, end: first))
                    spans.append(StoredKey(meter: meter.id, start: last, end: .distantFuture))
                }
            }
            let summed = try await sums(of: accountID, spans: spans, on: connection)
            if storing {
                let new = spans.filter { $0.start != .distantPast && $0.end != .distantFuture }
                let kept = Set(timelines.flatMap { timeline in timeline.periods.map { StoredKey(meter: timeline.meter.id, $0.period) } })
                let gone = (stored[accountID] ?? [:]).keys.filter { !kept.contains($0) }
                try await store(new.map { ($0, summed[$0] ?? UsageSums()) }, removing: gone, of: accountID, on: connection)
            }
            for (meter, periods) in timelines {
                guard let first = periods.first, let last = periods.last else { continue }
                let timeline = periods.map { period in
                    let key = StoredKey(meter: meter.id, period.period)
                    return UsageBalance.PeriodSums(
                        period: period.period, allowance: period.allowance, sums: stored[accountID]?[key] ?? summed[key] ?? UsageSums())
                }
                balances[accountID, default: []].append(UsageBalance.settle(
                    meter: meter.id, timeline: timeline,
                    before: summed[StoredKey(meter: meter.id, start: .distantPast, end: first.period.start)] ?? UsageSums(),
                    after: summed[StoredKey(meter: meter.id, start: last.period.end, end: .distantFuture)] ?? UsageSums(), now: now))
            }
        }
        return balances
    }

    /// The stored rows of `accounts` (of `meter`, when given).
    static func rows(of accounts: [String], meter: String? = nil, on connection: Connection) async throws -> [String: [StoredKey: UsageSums]] {
        var stored: [String: [StoredKey: UsageSums]] = [:]
        for row in try await connection.preparedQuery(
            """
            SELECT account_id, meter, period_start, period_end, used, rewards, credits, debits, entries FROM usage_totals
            WHERE account_id = ANY(\(accounts)::text[]) AND (\(meter)::text IS NULL OR meter = \(meter))
            """
        ) {
            let key = StoredKey(meter: try row.decode(String.self, at: 1), start: try row.decode(Date.self, at: 2), end: try row.decode(Date.self, at: 3))
            stored[try row.decode(String.self, at: 0), default: [:]][key] = try sums(row, from: 4)
        }
        return stored
    }

    /// The five sums of a row, in the columns from `column` on: used, rewards, credits, debits, entries.
    static func sums(_ row: Row, from column: Int) throws -> UsageSums {
        UsageSums(
            used: Int(try row.decode(Int64.self, at: column)), rewards: Int(try row.decode(Int64.self, at: column + 1)),
            credits: Int(try row.decode(Int64.self, at: column + 2)), debits: Int(try row.decode(Int64.self, at: column + 3)),
            entries: Int(try row.decode(Int64.self, at: column + 4)))
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

    /// The sums of `accountID`'s recorded entries in each of `spans`, from the entries (one
    /// statement, a single-shard one on Citus; the index `usage_entries_by_time` reads only the
    /// entries in the spans). A span without entries has no row: zero.
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
                       WHERE u.kind = 'credit_revoked' OR (u.kind = 'adjustment' AND u.units < 0)), 0)::bigint,
                   count(u.entry_id)::bigint
            FROM usage_entries u,
                 unnest(\(spans.map(\.meter))::text[], \(spans.map(\.start))::timestamptz[], \(spans.map(\.end))::timestamptz[])
                     WITH ORDINALITY AS p(m, s, e, i)
            WHERE u.account_id = \(accountID) AND u.meter = p.m AND u.at >= p.s AND u.at < p.e AND u.kind <> 'allowance'
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

    /// Stores the rows of `rows` (summed from the entries under the account's lock) and removes
    /// the rows of spans the timeline no longer has.
    static func store(
        _ rows: [(key: StoredKey, sums: UsageSums)], removing gone: [StoredKey], of accountID: String, on connection: Connection
    ) async throws {
        if !gone.isEmpty {
            try await connection.preparedQuery(
                """
                DELETE FROM usage_totals t
                USING unnest(\(gone.map(\.meter))::text[], \(gone.map(\.start))::timestamptz[], \(gone.map(\.end))::timestamptz[]) AS g(m, s, e)
                WHERE t.account_id = \(accountID) AND t.meter = g.m AND t.period_start = g.s AND t.period_end = g.e
                """
            )
        }
        guard !rows.isEmpty else { return }
        try await connection.preparedQuery(
            """
            INSERT INTO usage_totals (account_id, meter, period_start, period_end, used, rewards, credits, debits, entries)
            SELECT \(accountID), m, s, e, u, r, c, b, n FROM unnest(
                \(rows.map(\.key.meter))::text[], \(rows.map(\.key.start))::timestamptz[], \(rows.map(\.key.end))::timestamptz[],
                \(rows.map { Int64($0.sums.used) })::bigint[], \(rows.map { Int64($0.sums.rewards) })::bigint[],
                \(rows.map { Int64($0.sums.credits) })::bigint[], \(rows.map { Int64($0.sums.debits) })::bigint[],
                \(rows.map { Int64($0.sums.entries) })::bigint[]) AS v(m, s, e, u, r, c, b, n)
            ON CONFLICT (account_id, meter, period_start, period_end) DO UPDATE SET
                used = EXCLUDED.used, rewards = EXCLUDED.rewards, credits = EXCLUDED.credits, debits = EXCLUDED.debits,
                entries = EXCLUDED.entries
            """
        )
    }
}
