import Foundation
import Postgres
import SyncCore

/// The usage ledger in SQL (`usage_entries`, docs/USAGE.md): immutable entries written once by
/// id, read back as the set that ``UsageBalance`` turns into a balance, together with the
/// allowance periods ``UsageTimeline`` derives from the account's transactions (allowances are
/// never recorded: the bill is a function of the facts, not of what was known when usage arrived).
public struct UsageLedger: Sendable {
    let pool: ConnectionPool
    let catalogue: Catalogue
    let policy: UsagePolicy
    /// Sends a device's usage to the node that holds the account, on Citus (`nil`: to ``pool``).
    let router: AccountRouter?

    public init(pool: ConnectionPool, catalogue: Catalogue, policy: UsagePolicy = .default, router: AccountRouter? = nil) {
        self.pool = pool
        self.catalogue = catalogue
        self.policy = policy
        self.router = router
    }

    /// Connections for an account's own statements: on Citus its node's, where every statement
    /// of a device's usage is local and the transaction commits in one phase (the account's
    /// advisory lock is taken on that node from anywhere, sql/0046).
    private var accounts: AccountConnections { AccountConnections(pool: pool, router: router) }

    /// What a batch of device usage did.
    public struct Submission: Sendable, Equatable {
        /// Entries stored by this call.
        public var accepted: Int
        /// Entries already stored with the same content (retries, relays).
        public var duplicates: Int
    }

    /// A usage id already stored with other content: the whole batch is refused.
    public struct Conflict: Error, Sendable, Equatable {
        public var usageID: String
    }

    /// Usage dated before its device first reached the service (minus ``UsagePolicy/clockSkew``):
    /// the whole batch is refused (docs/USAGE.md, "Late usage").
    public struct BeforeFirstContact: Error, Sendable, Equatable {
        /// The position of the first such entry in the batch, and its id.
        public var index: Int
        public var usageID: String
        /// When the device first reached the service.
        public var firstContact: Date
    }

    /// Stores `usage` (entries of kind `usage`) of `accountID` reported by `device`, and records
    /// the device's contact (its first, for a device never seen: usage cannot be dated before it).
    /// One transaction: all or nothing, under the account's row lock, with the usage events the
    /// new entries call for (`usage.low`, `usage.exhausted`, a closed period's first totals).
    public func submit(_ usage: [UsageEntry], accountID: String, device: DeviceInfo, now: Date) async throws -> Submission {
        try await accounts.withTransaction(for: accountID) { connection in
            let locked = try await AccountLocks.lockStates(of: [accountID], catalogue: catalogue, now: now, on: connection)
            let firstContact = try await Self.recordContact(of: device, accountID: accountID, now: now, on: connection)
            let earliest = firstContact.addingTimeInterval(-UsagePolicy.clockSkew)
            // Compared as stored (microseconds), as the contact was read back.
            if let index = usage.firstIndex(where: { $0.at.roundedToMicroseconds < earliest }) {
                throw BeforeFirstContact(index: index, usageID: usage[index].id, firstContact: firstContact)
            }
            // Every period's row exists before the insert adds to it, so the bound below is exact.
            _ = try await UsageTotals.balances(of: [accountID], meter: nil, catalogue: catalogue, now: now, storing: true, on: connection)
            let inserted = try await Self.write(
                usage, accountID: accountID, deviceID: device.id, maximumPerPeriod: policy.maximumEntriesPerPeriod, on: connection)
            let duplicates = usage.filter { !inserted.contains(Self.key($0)) }
            if !duplicates.isEmpty {
                let stored = try await Self.entries(of: accountID, ids: duplicates.map(\.id), on: connection)
                for entry in duplicates where stored[Self.key(entry)].map({ $0.units != entry.units || $0.at != entry.at || $0.kind != entry.kind }) ?? false {
                    throw Conflict(usageID: entry.id)
                }
            }
            if !inserted.isEmpty {
                try await UsageEvents.write(
                    accountID: accountID, locked: locked[accountID], catalogue: catalogue, origin: .usage, now: now, on: connection)
            }
            return Submission(accepted: inserted.count, duplicates: usage.count - inserted.count)
        }
    }

    /// A batch would pass ``UsagePolicy/maximumEntriesPerPeriod`` in a period: refused whole.
    public struct PeriodFull: Error, Sendable, Equatable {
        public var meter: String
        public var period: UsagePeriod
        public var maximum: Int
    }

    /// A period of `accountID` that `added` (entries just inserted) took past `maximum` recorded
    /// entries, if any (in the inserting transaction: the caller then rolls back).
    static func fullPeriod(of accountID: String, receiving added: [UsageEntry], maximum: Int, on connection: Connection) async throws -> PeriodFull? {
        guard !added.isEmpty else { return nil }
        let rows = try await connection.preparedQuery(
            """
            SELECT t.meter, t.period_start, t.period_end FROM usage_totals t
            WHERE t.account_id = \(accountID) AND t.entries > \(Int64(maximum))
              AND EXISTS (SELECT 1 FROM unnest(\(added.map(\.meter))::text[], \(added.map(\.at))::timestamptz[]) AS a(m, at)
                          WHERE a.m = t.meter AND a.at >= t.period_start AND a.at < t.period_end)
            ORDER BY t.period_start LIMIT 1
            """
        )
        return try rows.first.map { row in
            PeriodFull(
                meter: try row.decode(String.self, at: 0),
                period: UsagePeriod(start: try row.decode(Date.self, at: 1), end: try row.decode(Date.self, at: 2)), maximum: maximum)
        }
    }

    /// Records that `device` of `accountID` reached the service at `now` (its last contact, and
    /// its first when it is new); returns its first contact.
    static func recordContact(of device: DeviceInfo, accountID: String, now: Date, on connection: Connection) async throws -> Date {
        let rows = try await connection.preparedQuery(
            """
            INSERT INTO devices (account_id, device_id, platform, app_version, first_seen_at, last_seen_at)
            VALUES (\(accountID), \(device.id), \(device.platform), \(device.appVersion), \(now), \(now))
            ON CONFLICT (account_id, device_id) DO UPDATE
            SET last_seen_at = GREATEST(devices.last_seen_at, EXCLUDED.last_seen_at),
                platform = COALESCE(EXCLUDED.platform, devices.platform),
                app_version = COALESCE(EXCLUDED.app_version, devices.app_version)
            RETURNING first_seen_at
            """
        )
        return try rows[0].decode(Date.self, at: 0)
    }

    /// What a verified rewarded ad did.
    public enum RewardOutcome: Sendable, Equatable {
        case granted
        /// This reward (network and transaction id) was granted before: nothing new.
        case replayed
        /// The account's rewards of that UTC day would pass the meter's `rewards_per_day`.
        case overDailyCap(cap: Int, alreadyToday: Int)
    }

    /// Grants `units` of `meter` for a verified rewarded ad (entry `reward:<network>:<id>`), once
    /// per id and within the meter's daily cap (rewards dated in the 24 hours before `now`), under
    /// the account's row lock so that concurrent callbacks cannot pass the cap together.
    public func reward(
        accountID: String, network: String, transactionID: String, meter: String, units: Int, cap: Int, at: Date, now: Date,
        once: String? = nil, alsoOnce: String? = nil
    ) async throws -> RewardOutcome {
        // Once per network transaction, or per `once` (a reward token's nonce) when given.
        let byTransaction = "reward:\(network):\(transactionID)"
        let byToken = { (nonce: String) in "reward:\(network):token:\(nonce)" }
        let entry = UsageEntry(id: once.map(byToken) ?? byTransaction, meter: meter, kind: .reward, units: units, at: at)
        return try await pool.withTransaction { connection in
            let locked = try await AccountLocks.lockStates(of: [accountID], catalogue: catalogue, now: now, on: connection)
            // The reward under its other name counts too: tokens turned on or off while AdMob
            // retries a callback must not credit it twice (`alsoOnce`: the token's nonce when
            // the reward is named by the transaction, and the other way round).
            let ids = [byTransaction] + [once, alsoOnce].compactMap { $0 }.map(byToken)
            if !(try await Self.entries(of: accountID, ids: ids, on: connection)).isEmpty { return .replayed }
            let rows = try await connection.preparedQuery(
                """
                SELECT COALESCE(sum(units), 0)::bigint FROM usage_entries
                WHERE account_id = \(accountID) AND meter = \(meter) AND kind = 'reward' AND at > \(now.addingTimeInterval(-86_400))
                """
            )
            let today = Int(try rows[0].decode(Int64.self, at: 0))
            guard today + units <= cap else { return .overDailyCap(cap: cap, alreadyToday: today) }
            try await Self.write([entry], accountID: accountID, deviceID: nil, on: connection)
            try await UsageEvents.write(
                credits: [(entry, transactionID, nil, nil)], accountID: accountID, locked: locked[accountID], catalogue: catalogue,
                origin: .reward, now: now, on: connection)
            return .granted
        }
    }

    /// What `subsync credits adjust` did.
    public struct Adjustment: Sendable, Codable, Equatable {
        public var accountID: String
        public var entry: UsageEntry
        public var actor: String
        public var reason: String
        /// False when an adjustment with this id was already recorded (a retried command).
        public var recorded: Bool

        enum CodingKeys: String, CodingKey {
            case accountID = "account_id"
            case entry, actor, reason, recorded
        }
    }

    /// Records an operator's grant (positive `units`) or debit (negative) of `meter`, audited
    /// with `actor` and `reason`, once per `id` (a retry with the same id records nothing; the
    /// same id with other units is a ``Conflict``), under the account's row lock, with its
    /// `credits.granted` (a grant) or `credits.revoked` (a debit) and the usage events it calls for.
    public func adjust(accountID: String, meter: String, units: Int, id: String, actor: String, reason: String, now: Date) async throws -> Adjustment {
        let entry = UsageEntry(id: "adjustment:\(id)", meter: meter, kind: .adjustment, units: units, at: now.roundedToMicroseconds)
        return try await pool.withTransaction { connection in
            let locked = try await AccountLocks.lockStates(of: [accountID], catalogue: catalogue, now: now, on: connection)
            let rows = try await connection.preparedQuery(
                """
                INSERT INTO usage_entries (account_id, meter, entry_id, kind, units, at, actor, reason)
                VALUES (\(accountID), \(meter), \(entry.id), 'adjustment', \(Int64(units)), \(entry.at), \(actor), \(reason))
                ON CONFLICT (account_id, meter, entry_id) DO NOTHING
                RETURNING entry_id
                """
            )
            if rows.count == 1 {
                try await UsageTotals.add([(accountID, entry)], on: connection)
                try await UsageEvents.write(
                    credits: [(entry, nil, actor, reason)], accountID: accountID, locked: locked[accountID], catalogue: catalogue,
                    origin: .admin, now: now, on: connection)
                return Adjustment(accountID: accountID, entry: entry, actor: actor, reason: reason, recorded: true)
            }
            guard let stored = try await Self.entries(of: accountID, ids: [entry.id], on: connection)[Self.key(entry)], stored.units == units else {
                throw Conflict(usageID: entry.id)
            }
            return Adjustment(accountID: accountID, entry: stored, actor: actor, reason: reason, recorded: false)
        }
    }

    /// The balance of every meter of the catalogue at `now` (from the stored period totals and the
    /// timeline; one snapshot, nothing stored).
    public func balances(of accountID: String, now: Date) async throws -> [UsageBalance] {
        try await accounts.withTransaction(for: accountID, isolation: .repeatableRead) { connection in
            try await UsageTotals.balances(of: [accountID], meter: nil, catalogue: catalogue, now: now, storing: false, on: connection)[accountID] ?? []
        }
    }

    /// Every meter's balance recomputed from every recorded entry and the timeline, without the
    /// stored period totals' sums (what reconcile and the tests hold the totals to): the final
    /// periods keep their stored allowance and tier (they are never derived again), every entry
    /// counts where it was counted when written (`counted_at`; a meter's entries before its first
    /// final period count in it). Reads the whole ledger: an operator's and a test's tool, not a
    /// request's.
    public func recomputedBalances(of accountID: String, now: Date) async throws -> [UsageBalance] {
        try await pool.withTransaction(isolation: .repeatableRead) { connection in
            try await Self.recomputedBalances(of: accountID, catalogue: catalogue, now: now, on: connection)
        }
    }

    static func recomputedBalances(of accountID: String, catalogue: Catalogue, now: Date, on connection: Connection) async throws -> [UsageBalance] {
        let recorded = try await connection.preparedQuery(
            """
            SELECT entry_id, meter, kind, units, COALESCE(counted_at, at), period_end FROM usage_entries
            WHERE account_id = \(accountID) AND kind <> 'allowance'
            """
        ).map(Self.entry)
        let transactions = try await transactionLedgers(of: [accountID], on: connection)[accountID]?.unorderedAggregates ?? []
        let start = try await timelineStarts(of: [accountID], now: now, on: connection)[accountID] ?? now
        let rows = try await UsageTotals.rows(of: [accountID], on: connection)[accountID] ?? [:]
        return catalogue.meters.map { meter in
            let final = UsageTotals.finalPeriods(of: meter.id, in: rows)
            let periods = UsageTimeline.periods(meter: meter, catalogue: catalogue, transactions: transactions, from: start, through: now, after: final)
            var entries = recorded.filter { $0.meter == meter.id }
            if let first = final.first?.period.start {
                for index in entries.indices where entries[index].at < first { entries[index].at = first }
            }
            return UsageBalance.compute(meter: meter.id, entries: entries + UsageTimeline.allowances(meter: meter, periods: periods), now: now)
        }
    }

    /// A page of recorded entries of one meter, newest first.
    public struct EntryPage: Sendable {
        public var entries: [UsageEntry]
        /// Where the next page starts (`nil`: this was the last).
        public var next: EntryCursor?
    }

    /// A position in a meter's entries, newest first: the last entry of a page.
    public struct EntryCursor: Sendable, Equatable {
        public var meter: String
        public var at: Date
        public var entryID: String

        public init(meter: String, at: Date, entryID: String) {
            self.meter = meter
            self.at = at
            self.entryID = entryID
        }
    }

    /// Up to `limit` recorded entries of `meter` of `accountID` dated in `[from, to)`, newest
    /// first, after `cursor` when given. Reads only the page (index `usage_entries_by_time`).
    public func entries(
        of accountID: String, meter: String, from: Date, to: Date, limit: Int, after cursor: EntryCursor? = nil
    ) async throws -> EntryPage {
        let rows = try await pool.preparedQuery(
            """
            SELECT entry_id, meter, kind, units, at, period_end FROM usage_entries
            WHERE account_id = \(accountID) AND meter = \(meter) AND kind <> 'allowance' AND at >= \(from) AND at < \(to)
              AND (\(cursor?.at)::timestamptz IS NULL OR (at, entry_id) < (\(cursor?.at)::timestamptz, \(cursor?.entryID)::text))
            ORDER BY at DESC, entry_id DESC
            LIMIT \(Int64(limit + 1))
            """
        )
        var entries = try rows.map(Self.entry)
        var next: EntryCursor?
        if entries.count > limit {
            entries.removeLast(entries.count - limit)
            if let last = entries.last { next = EntryCursor(meter: meter, at: last.at, entryID: last.id) }
        }
        return EntryPage(entries: entries, next: next)
    }

    /// Where each account's allowance timeline starts: the first contact of its first device,
    /// less the clock skew (usage may be dated that early); `now` less the skew for an account
    /// without devices. Every account of `accountIDs` has one.
    static func timelineStarts(of accountIDs: [String], now: Date, on connection: Connection) async throws -> [String: Date] {
        var firstContacts: [String: Date] = [:]
        for row in try await connection.preparedQuery(
            """
            SELECT account_id, min(first_seen_at) FROM devices
            WHERE account_id = ANY(\(accountIDs)::text[]) GROUP BY account_id
            """
        ) {
            firstContacts[try row.decode(String.self, at: 0)] = try row.decode(Date.self, at: 1)
        }
        return Dictionary(accountIDs.map { ($0, (firstContacts[$0] ?? now).addingTimeInterval(-UsagePolicy.clockSkew)) }, uniquingKeysWith: { first, _ in first })
    }

    /// The stored transaction aggregates of each of `accountIDs` (what the timeline is derived from).
    static func transactionLedgers(of accountIDs: [String], on connection: Connection) async throws -> [String: TransactionLedger] {
        var ledgers: [String: TransactionLedger] = [:]
        for row in try await connection.preparedQuery(
            "SELECT account_id, aggregate FROM transactions WHERE account_id = ANY(\(accountIDs)::text[])"
        ) {
            ledgers[try row.decode(String.self, at: 0), default: TransactionLedger()].add(
                try row.decode(JSONColumn<TransactionAggregate>.self, at: 1).value)
        }
        return ledgers
    }

    /// Inserts `entries` that are not stored yet, adds them to the stored period totals, and
    /// returns the keys (meter, id) it inserted. With `maximumPerPeriod`, throws ``PeriodFull``
    /// when the new entries take a period past it (the caller's transaction then rolls back).
    @discardableResult
    static func write(
        _ unsorted: [UsageEntry], accountID: String, deviceID: String?, maximumPerPeriod: Int? = nil, on connection: Connection
    ) async throws -> Set<String> {
        guard !unsorted.isEmpty else { return [] }
        // In key order, so that two writers of overlapping entries take their locks in one order.
        let entries = unsorted.sorted { key($0) < key($1) }
        let rows = try await connection.preparedQuery(
            """
            INSERT INTO usage_entries (account_id, meter, entry_id, kind, units, at, period_end, device_id)
            SELECT \(accountID), m, i, k, u, a, p, \(deviceID) FROM unnest(
                \(entries.map(\.meter))::text[], \(entries.map(\.id))::text[], \(entries.map(\.kind.rawValue))::text[],
                \(entries.map { $0.units.map(Int64.init) })::bigint[], \(entries.map(\.at))::timestamptz[],
                \(entries.map(\.periodEnd))::timestamptz[]
            ) AS v(m, i, k, u, a, p)
            ON CONFLICT (account_id, meter, entry_id) DO NOTHING
            RETURNING meter, entry_id
            """
        )
        let inserted = Set(try rows.map { key(meter: try $0.decode(String.self, at: 0), id: try $0.decode(String.self, at: 1)) })
        let added = entries.filter { inserted.contains(key($0)) }
        try await UsageTotals.add(added.map { (accountID, $0) }, on: connection)
        if let maximumPerPeriod, let full = try await fullPeriod(of: accountID, receiving: added, maximum: maximumPerPeriod, on: connection) {
            throw full
        }
        return inserted
    }

    /// Writes the entries that follow from the resolved accounts (consumables' credits and
    /// refunds) in the resolving transaction; returns the accounts that got new ones.
    static func writeDerived(_ entries: [(accountID: String, entries: [UsageEntry])], on connection: Connection) async throws -> Set<String> {
        let flat = entries.flatMap { account in account.entries.map { (account.accountID, $0) } }
            .sorted { ($0.0, key($0.1)) < ($1.0, key($1.1)) }
        guard !flat.isEmpty else { return [] }
        let rows = try await connection.preparedQuery(
            """
            INSERT INTO usage_entries (account_id, meter, entry_id, kind, units, at, period_end)
            SELECT * FROM unnest(
                \(flat.map(\.0))::text[], \(flat.map(\.1.meter))::text[], \(flat.map(\.1.id))::text[],
                \(flat.map(\.1.kind.rawValue))::text[], \(flat.map { $0.1.units.map(Int64.init) })::bigint[],
                \(flat.map(\.1.at))::timestamptz[], \(flat.map(\.1.periodEnd))::timestamptz[])
            ON CONFLICT (account_id, meter, entry_id) DO NOTHING
            RETURNING account_id, meter, entry_id
            """
        )
        var inserted: Set<[String]> = []
        for row in rows { inserted.insert([try row.decode(String.self, at: 0), try row.decode(String.self, at: 1), try row.decode(String.self, at: 2)]) }
        let new = flat.filter { inserted.contains([$0.0, $0.1.meter, $0.1.id]) }
        try await UsageTotals.add(new.map { (accountID: $0.0, entry: $0.1) }, on: connection)
        return Set(new.map(\.0))
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

    /// An entry's identity in `usage_entries` (its key after the account): meter and id.
    static func key(_ entry: UsageEntry) -> String { key(meter: entry.meter, id: entry.id) }

    static func key(meter: String, id: String) -> String { meter + "\u{0}" + id }

    static func entries(of accountID: String, ids: [String], on connection: Connection) async throws -> [String: UsageEntry] {
        let rows = try await connection.preparedQuery(
            """
            SELECT entry_id, meter, kind, units, at, period_end FROM usage_entries
            WHERE account_id = \(accountID) AND entry_id = ANY(\(ids)::text[])
            """
        )
        var byKey: [String: UsageEntry] = [:]
        for row in rows {
            let entry = try entry(row)
            byKey[key(entry)] = entry
        }
        return byKey
    }

    static func entry(_ row: Row) throws -> UsageEntry {
        let kindText = try row.decode(String.self, at: 2)
        guard let kind = UsageEntry.Kind(rawValue: kindText) else { throw UnknownKind(kind: kindText) }
        return UsageEntry(
            id: try row.decode(String.self, at: 0), meter: try row.decode(String.self, at: 1), kind: kind,
            units: try row.decode(Int64?.self, at: 3).map { Int($0) }, at: try row.decode(Date.self, at: 4),
            periodEnd: try row.decode(Date?.self, at: 5))
    }

    struct UnknownKind: Error {
        var kind: String
    }
}
