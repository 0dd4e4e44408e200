import Foundation
import Postgres
import SyncCore

/// Reads what the API shows of an account: its resolved state and its devices.
public struct AccountReader: Sendable {
    let pool: ConnectionPool
    let catalogue: Catalogue

    public init(pool: ConnectionPool, catalogue: Catalogue) {
        self.pool = pool
        self.catalogue = catalogue
    }

    /// A device as last seen.
    public struct Device: Sendable, Codable, Equatable {
        public var id: String
        public var platform: String?
        public var appVersion: String?
        public var firstSeenAt: Date
        public var lastSeenAt: Date

        enum CodingKeys: String, CodingKey {
            case id
            case platform
            case appVersion = "app_version"
            case firstSeenAt = "first_seen_at"
            case lastSeenAt = "last_seen_at"
        }
    }

    /// The account as persisted.
    public struct Snapshot: Sendable {
        public var accountID: String
        /// The resolved state; the base (free) tier for an account never seen.
        public var state: AccountState
        public var devices: [Device]
        /// The sequence number of the account's latest event (0: none yet).
        public var lastSequence: Int64
        /// When the workers last resolved the account; nil for an account never seen.
        public var resolvedAt: Date?
        /// Reports accepted but not resolved yet.
        public var pendingReports: Int
    }

    /// The account's snapshot. An unknown account reads as the free tier with no devices.
    public func snapshot(accountID: String, now: Date = Date()) async throws -> Snapshot {
        try await pool.withConnection { connection in
            let stateRows = try await connection.preparedQuery(
                """
                SELECT state, last_sequence, resolved_at,
                       (SELECT count(*) FROM reports WHERE account_id = \(accountID) AND status = 'pending')
                FROM account_states WHERE account_id = \(accountID)
                """
            )
            let deviceRows = try await connection.preparedQuery(
                """
                SELECT device_id, platform, app_version, first_seen_at, last_seen_at
                FROM devices WHERE account_id = \(accountID) ORDER BY last_seen_at DESC, device_id
                """
            )
            let devices = try deviceRows.map { row in
                Device(
                    id: try row.decode(String.self, at: 0),
                    platform: try row.decode(String?.self, at: 1),
                    appVersion: try row.decode(String?.self, at: 2),
                    firstSeenAt: try row.decode(Date.self, at: 3),
                    lastSeenAt: try row.decode(Date.self, at: 4)
                )
            }
            guard let row = stateRows.first else {
                let pending = try await connection.preparedQuery(
                    "SELECT count(*) FROM reports WHERE account_id = \(accountID) AND status = 'pending'"
                )
                return Snapshot(
                    accountID: accountID,
                    state: Resolver.resolve(transactions: [], catalogue: catalogue, now: now),
                    devices: devices,
                    lastSequence: 0,
                    resolvedAt: nil,
                    pendingReports: try pending[0].decode(Int.self, at: 0)
                )
            }
            return Snapshot(
                accountID: accountID,
                state: try row.decode(JSONColumn<AccountState>.self, at: 0).value,
                devices: devices,
                lastSequence: try row.decode(Int64.self, at: 1),
                resolvedAt: try row.decode(Date.self, at: 2),
                pendingReports: try row.decode(Int.self, at: 3)
            )
        }
    }
}
