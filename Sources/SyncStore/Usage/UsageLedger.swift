import Foundation
import Postgres
import SyncCore

/// The usage ledger in SQL (`usage_entries`, docs/USAGE.md): immutable entries written once by
/// id, read back as the set that ``UsageBalance`` turns into a balance.
public struct UsageLedger: Sendable {
    let pool: ConnectionPool
    let catalogue: Catalogue

    public init(pool: ConnectionPool, catalogue: Catalogue) {
        self.pool = pool
        self.catalogue = catalogue
    }

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

    /// Stores `usage` (entries of kind `usage`) of `accountID` reported by `deviceID`, together
    /// with the allowance of every period the usage falls in (resolved from the account's stored
    /// transactions at each usage's time, so usage reported days late lands in the period it
    /// happened in, with that period's allowance). One transaction: all or nothing, under the
    /// account's row lock, with the usage events the new entries call for (`usage.low`,
    /// `usage.exhausted`, a closed period's revised totals).
    public func submit(_ usage: [UsageEntry], accountID: String, deviceID: String, now: Date) async throws -> Submission {
        try await pool.withTransaction { connection in
            let locked = try await ResolutionEngine.lockStates(of: [accountID], catalogue: catalogue, now: now, on: connection)
            try await writeAllowances(of: accountID, at: usage.map(\.at) + [now], on: connection)
            let inserted = try await Self.write(usage, accountID: accountID, deviceID: deviceID, on: connection)
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

    /// Writes the allowance of every meter at each of `times`, resolved from the account's stored
    /// transactions at that time (the tier the account had then).
    func writeAllowances(of accountID: String, at times: [Date], on connection: Connection) async throws {
        guard !catalogue.meters.isEmpty else { return }
        let ledger = try await Self.transactions(of: accountID, on: connection)
        // Times of one period give the same entries: one of each is written.
        var allowances: [String: UsageEntry] = [:]
        for time in Set(times) {
            let state = Resolver.resolve(ledger: ledger, catalogue: catalogue, now: time)
            for entry in UsageAllowances.entries(for: state, catalogue: catalogue, now: time) { allowances[Self.key(entry)] = entry }
        }
        try await Self.write(Array(allowances.values), accountID: accountID, deviceID: nil, on: connection)
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
        accountID: String, network: String, transactionID: String, meter: String, units: Int, cap: Int, at: Date, now: Date
    ) async throws -> RewardOutcome {
        let entry = UsageEntry(id: "reward:\(network):\(transactionID)", meter: meter, kind: .reward, units: units, at: at)
        return try await pool.withTransaction { connection in
            let locked = try await ResolutionEngine.lockStates(of: [accountID], catalogue: catalogue, now: now, on: connection)
            if !(try await Self.entries(of: accountID, ids: [entry.id], on: connection)).isEmpty { return .replayed }
            let rows = try await connection.preparedQuery(
                """
                SELECT COALESCE(sum(units), 0)::bigint FROM usage_entries
                WHERE account_id = \(accountID) AND meter = \(meter) AND kind = 'reward' AND at > \(now.addingTimeInterval(-86_400))
                """
            )
            let today = Int(try rows[0].decode(Int64.self, at: 0))
            guard today + units <= cap else { return .overDailyCap(cap: cap, alreadyToday: today) }
            try await writeAllowances(of: accountID, at: [at, now], on: connection)
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
            let locked = try await ResolutionEngine.lockStates(of: [accountID], catalogue: catalogue, now: now, on: connection)
            let rows = try await connection.preparedQuery(
                """
                INSERT INTO usage_entries (account_id, meter, entry_id, kind, units, at, actor, reason)
                VALUES (\(accountID), \(meter), \(entry.id), 'adjustment', \(Int64(units)), \(entry.at), \(actor), \(reason))
                ON CONFLICT (account_id, meter, entry_id) DO NOTHING
                RETURNING entry_id
                """
            )
            if rows.count == 1 {
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

    /// Every stored entry of `accountID` (of `meter`, when given), oldest first.
    static func entries(of accountID: String, meter: String?, on connection: Connection) async throws -> [UsageEntry] {
        let rows = try await connection.preparedQuery(
            """
            SELECT entry_id, meter, kind, units, at, period_end FROM usage_entries
            WHERE account_id = \(accountID) AND (\(meter)::text IS NULL OR meter = \(meter))
            ORDER BY at, entry_id
            """
        )
        return try rows.map(Self.entry)
    }

    /// The balance of every meter of the catalogue at `now`.
    public func balances(of accountID: String, now: Date) async throws -> [UsageBalance] {
        let entries = try await entries(of: accountID, now: now)
        return catalogue.meters.map { UsageBalance.compute(meter: $0.id, entries: entries, now: now) }
    }

    /// The stored entries of `accountID` (of `meter`, when given) plus the allowance of the
    /// period containing `now`, resolved from the stored transactions: an account that nothing
    /// has written an allowance for yet this period (no usage, no resolution) still shows it.
    public func entries(of accountID: String, meter: String? = nil, now: Date) async throws -> [UsageEntry] {
        try await pool.withConnection { connection in
            let stored = try await Self.entries(of: accountID, meter: meter, on: connection)
            guard !catalogue.meters.isEmpty else { return stored }
            let state = Resolver.resolve(ledger: try await Self.transactions(of: accountID, on: connection), catalogue: catalogue, now: now)
            let current = UsageAllowances.entries(for: state, catalogue: catalogue, now: now).filter { meter == nil || $0.meter == meter }
            let storedIDs = Set(stored.map(Self.key))
            return stored + current.filter { !storedIDs.contains(Self.key($0)) }
        }
    }

    /// Inserts `entries` that are not stored yet; returns the keys (meter, id) it inserted.
    @discardableResult
    static func write(_ unsorted: [UsageEntry], accountID: String, deviceID: String?, on connection: Connection) async throws -> Set<String> {
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
        return Set(try rows.map { key(meter: try $0.decode(String.self, at: 0), id: try $0.decode(String.self, at: 1)) })
    }

    /// The accounts whose ledger ``writeDerived(_:on:)`` added to.
    struct Touched {
        /// Accounts given a new allowance entry (a new period, or a new tier in one).
        var allowances: Set<String> = []
        /// Accounts given a new credit or refund.
        var grants: Set<String> = []
    }

    /// Writes the entries that follow from the resolved accounts (allowances, consumables'
    /// credits and refunds) in the resolving transaction; says which accounts got new ones.
    static func writeDerived(_ entries: [(accountID: String, entries: [UsageEntry])], on connection: Connection) async throws -> Touched {
        let flat = entries.flatMap { account in account.entries.map { (account.accountID, $0) } }
            .sorted { ($0.0, key($0.1)) < ($1.0, key($1.1)) }
        guard !flat.isEmpty else { return Touched() }
        let rows = try await connection.preparedQuery(
            """
            INSERT INTO usage_entries (account_id, meter, entry_id, kind, units, at, period_end)
            SELECT * FROM unnest(
                \(flat.map(\.0))::text[], \(flat.map(\.1.meter))::text[], \(flat.map(\.1.id))::text[],
                \(flat.map(\.1.kind.rawValue))::text[], \(flat.map { $0.1.units.map(Int64.init) })::bigint[],
                \(flat.map(\.1.at))::timestamptz[], \(flat.map(\.1.periodEnd))::timestamptz[])
            ON CONFLICT (account_id, meter, entry_id) DO NOTHING
            RETURNING account_id, kind
            """
        )
        var touched = Touched()
        for row in rows {
            let accountID = try row.decode(String.self, at: 0)
            if try row.decode(String.self, at: 1) == UsageEntry.Kind.allowance.rawValue {
                touched.allowances.insert(accountID)
            } else {
                touched.grants.insert(accountID)
            }
        }
        return touched
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

    static func transactions(of accountID: String, on connection: Connection) async throws -> TransactionLedger {
        var ledger = TransactionLedger()
        for row in try await connection.preparedQuery("SELECT aggregate FROM transactions WHERE account_id = \(accountID)") {
            ledger.add(try row.decode(JSONColumn<TransactionAggregate>.self, at: 0).value)
        }
        return ledger
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
