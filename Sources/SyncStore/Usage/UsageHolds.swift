import Foundation
import Postgres
import SyncCore

/// Holds on a meter (`usage_holds`, docs/USAGE.md): an online device reserves units before it
/// spends them, then settles the hold with what it used or releases it.
///
/// Every grant, settle and release takes the account's `account_states` row lock (the row the
/// resolving transaction locks too), so the balance and the open holds a grant is checked against
/// cannot change under it: two devices racing for the last minutes, through any number of
/// processes, cannot both get them.
public struct UsageHolds: Sendable {
    let pool: ConnectionPool
    let catalogue: Catalogue
    let policy: UsagePolicy
    /// Sends an account's holds to the node that holds the account, on Citus (`nil`: to ``pool``).
    let router: AccountRouter?

    public init(pool: ConnectionPool, catalogue: Catalogue, policy: UsagePolicy = .default, router: AccountRouter? = nil) {
        self.pool = pool
        self.catalogue = catalogue
        self.policy = policy
        self.router = router
    }

    /// Connections for an account's own statements (its node's, on Citus: sql/0046).
    private var accounts: AccountConnections { AccountConnections(pool: pool, router: router) }

    public struct Hold: Sendable, Equatable, Codable {
        public enum Status: String, Sendable, Codable { case open, settled, released, expired }
        public var id: UUID
        public var meter: String
        public var deviceID: String
        public var units: Int
        public var createdAt: Date
        public var expiresAt: Date
        public var status: Status
        /// What a settled hold's usage was (may be more or less than `units`).
        public var settledUnits: Int?

        enum CodingKeys: String, CodingKey {
            case id, meter, units, status
            case deviceID = "device_id"
            case createdAt = "created_at"
            case expiresAt = "expires_at"
            case settledUnits = "settled_units"
        }
    }

    /// What a reservation got.
    public struct Reservation: Sendable {
        /// The hold, when at least one unit was granted.
        public var hold: Hold?
        /// What was left to hold before this one (`nil`: unlimited).
        public var available: Int?
    }

    public enum HoldError: Error, Sendable, Equatable {
        case notFound
        /// A settle's `at` before the hold was created (the call cannot have happened before it
        /// was reserved) or after `now`.
        case timeOutsideHold(createdAt: Date)
        /// The hold was already settled with other units, or released (settle), or settled (release).
        case ended(Hold.Status)
    }

    /// Reserves up to `units` of `meter` for `ttl`: as many as the balance minus every open hold
    /// allows (all of them on an unlimited allowance); none when nothing is left.
    public func reserve(
        accountID: String, device: DeviceInfo, meter: String, units: Int, ttl: TimeInterval, now: Date
    ) async throws -> Reservation {
        try await accounts.withTransaction(for: accountID) { connection in
            _ = try await AccountLocks.lockStates(of: [accountID], catalogue: catalogue, now: now, on: connection)
            _ = try await UsageLedger.recordContact(of: device, accountID: accountID, now: now, on: connection)
            let open = try await Self.openHolds(of: accountID, meter: meter, now: now, on: connection)
            if open.count >= policy.maximumOpenHolds {
                throw TooManyHolds(maximum: policy.maximumOpenHolds, nextExpiry: open.earliestExpiry ?? now)
            }
            let balances = try await UsageTotals.balances(of: [accountID], meter: meter, catalogue: catalogue, now: now, storing: true, on: connection)
            let balance = balances[accountID]?.first ?? UsageBalance.compute(meter: meter, entries: [], now: now)
            let available = balance.available.map { max(0, $0 - open.units) }
            let granted = available.map { min(units, $0) } ?? units
            guard granted > 0 else { return Reservation(hold: nil, available: available) }
            let hold = Hold(
                id: UUID(), meter: meter, deviceID: device.id, units: granted, createdAt: now.roundedToMicroseconds,
                expiresAt: now.addingTimeInterval(ttl).roundedToMicroseconds, status: .open, settledUnits: nil)
            try await connection.preparedQuery(
                """
                INSERT INTO usage_holds (account_id, hold_id, meter, device_id, units, created_at, expires_at)
                VALUES (\(accountID), \(hold.id.uuidString)::uuid, \(meter), \(device.id), \(Int64(granted)), \(hold.createdAt), \(hold.expiresAt))
                """
            )
            return Reservation(hold: hold, available: available)
        }
    }

    /// Settles a hold with the units actually used (written to the ledger as a usage entry
    /// `hold:<id>` at `at`), even past its expiry: the call happened. Settling again with
    /// the same units answers the same; with other units, or a released hold, is ``HoldError/ended(_:)``.
    /// `at` must lie between the hold's creation and `now` (``HoldError/timeOutsideHold(createdAt:)``):
    /// a settle cannot place the call in an earlier period than the one it was reserved in.
    public func settle(accountID: String, holdID: UUID, units: Int, at: Date, now: Date) async throws -> Hold {
        try await accounts.withTransaction(for: accountID) { connection in
            let locked = try await AccountLocks.lockStates(of: [accountID], catalogue: catalogue, now: now, on: connection)
            guard var hold = try await Self.hold(accountID: accountID, holdID: holdID, now: now, on: connection) else { throw HoldError.notFound }
            switch hold.status {
            case .settled where hold.settledUnits == units: return hold
            case .settled, .released: throw HoldError.ended(hold.status)
            case .open, .expired: break
            }
            // Within a microsecond: both sides went through timestamptz's precision.
            guard at.addingTimeInterval(0.000_001) >= hold.createdAt, at <= now.addingTimeInterval(0.000_001) else {
                throw HoldError.timeOutsideHold(createdAt: hold.createdAt)
            }
            // `hold:` ids cannot be written by devices (theirs are `usage:<device>:<id>`). A call
            // that used nothing writes no entry (an entry of 0 units would only fill the period).
            if units > 0 {
                let usage = UsageEntry(id: "hold:\(holdID.uuidString.lowercased())", meter: hold.meter, kind: .usage, units: units, at: at)
                let written = try await UsageLedger.write(
                    [usage], accountID: accountID, deviceID: hold.deviceID, maximumPerPeriod: policy.maximumEntriesPerPeriod, on: connection)
                guard written.count == 1 else { throw HoldError.ended(.settled) }
            }
            try await connection.preparedQuery(
                """
                UPDATE usage_holds SET status = 'settled', settled_units = \(Int64(units)), ended_at = \(now)
                WHERE account_id = \(accountID) AND hold_id = \(holdID.uuidString)::uuid
                """
            )
            try await UsageEvents.write(
                accountID: accountID, locked: locked[accountID], catalogue: catalogue, origin: .usage, now: now, on: connection)
            hold.status = .settled
            hold.settledUnits = units
            return hold
        }
    }

    /// Releases an open (or expired) hold; releasing again answers the same; a settled hold is
    /// ``HoldError/ended(_:)``.
    public func release(accountID: String, holdID: UUID, now: Date) async throws -> Hold {
        try await accounts.withTransaction(for: accountID) { connection in
            _ = try await AccountLocks.lockStates(of: [accountID], catalogue: catalogue, now: now, on: connection)
            guard var hold = try await Self.hold(accountID: accountID, holdID: holdID, now: now, on: connection) else { throw HoldError.notFound }
            switch hold.status {
            case .released: return hold
            case .settled: throw HoldError.ended(.settled)
            case .open, .expired: break
            }
            try await connection.preparedQuery(
                """
                UPDATE usage_holds SET status = 'released', ended_at = \(now)
                WHERE account_id = \(accountID) AND hold_id = \(holdID.uuidString)::uuid
                """
            )
            hold.status = .released
            return hold
        }
    }

    /// The open, unexpired holds of `accountID`.
    public func open(of accountID: String, now: Date) async throws -> [Hold] {
        let rows = try await accounts.withConnection(for: accountID) { try await $0.preparedQuery(
            """
            SELECT hold_id::text, meter, device_id, units, created_at, expires_at, status, settled_units FROM usage_holds
            WHERE account_id = \(accountID) AND status = 'open' AND expires_at > \(now)
            ORDER BY created_at, hold_id
            """
        ) }
        return try rows.map { try Self.hold($0, now: now) }
    }

    /// The open, unexpired holds of one meter of `accountID`: how many, how many units they
    /// reserve, and when the first of them expires.
    static func openHolds(
        of accountID: String, meter: String, now: Date, on connection: Connection
    ) async throws -> (count: Int, units: Int, earliestExpiry: Date?) {
        let rows = try await connection.preparedQuery(
            """
            SELECT count(*)::bigint, COALESCE(sum(units), 0)::bigint, min(expires_at) FROM usage_holds
            WHERE account_id = \(accountID) AND meter = \(meter) AND status = 'open' AND expires_at > \(now)
            """
        )
        return (Int(try rows[0].decode(Int64.self, at: 0)), Int(try rows[0].decode(Int64.self, at: 1)), try rows[0].decode(Date?.self, at: 2))
    }

    /// An account already has the most open holds a meter allows (``UsagePolicy/maximumOpenHolds``).
    public struct TooManyHolds: Error, Sendable, Equatable {
        public var maximum: Int
        /// When the first of them expires (a hold settled or released frees one sooner).
        public var nextExpiry: Date
    }

    static func hold(accountID: String, holdID: UUID, now: Date, on connection: Connection) async throws -> Hold? {
        let rows = try await connection.preparedQuery(
            """
            SELECT hold_id::text, meter, device_id, units, created_at, expires_at, status, settled_units FROM usage_holds
            WHERE account_id = \(accountID) AND hold_id = \(holdID.uuidString)::uuid
            """
        )
        return try rows.first.map { try hold($0, now: now) }
    }

    static func hold(_ row: Row, now: Date) throws -> Hold {
        let statusText = try row.decode(String.self, at: 6)
        let expiresAt = try row.decode(Date.self, at: 5)
        var status = Hold.Status(rawValue: statusText) ?? .released
        if status == .open, expiresAt <= now { status = .expired }
        let idText = try row.decode(String.self, at: 0)
        guard let id = UUID(uuidString: idText) else { throw UnreadableHoldID(text: idText) }
        return Hold(
            id: id, meter: try row.decode(String.self, at: 1),
            deviceID: try row.decode(String.self, at: 2), units: Int(try row.decode(Int64.self, at: 3)),
            createdAt: try row.decode(Date.self, at: 4), expiresAt: expiresAt, status: status,
            settledUnits: try row.decode(Int64?.self, at: 7).map { Int($0) })
    }

    struct UnreadableHoldID: Error {
        var text: String
    }
}
