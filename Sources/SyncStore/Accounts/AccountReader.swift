import Foundation
import Postgres
import SyncCore

/// Reads what the API shows of an account: its resolved state and its devices.
public struct AccountReader: Sendable {
    let pool: ConnectionPool
    let catalogue: Catalogue
    /// Sends the read to the node that holds the account, on Citus (`nil`: to ``pool``).
    let router: AccountRouter?

    public init(pool: ConnectionPool, catalogue: Catalogue, router: AccountRouter? = nil) {
        self.pool = pool
        self.catalogue = catalogue
        self.router = router
    }

    /// Connections for an account's own statements (its node's, on Citus).
    private var accounts: AccountConnections { AccountConnections(pool: pool, router: router) }

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

    /// The account's snapshot, in one round trip. An unknown account reads as the free tier.
    public func snapshot(accountID: String, now: Date = Date()) async throws -> Snapshot {
        try await snapshot(accountID: accountID, now: now, countingPending: []).snapshot
    }

    /// The account's snapshot and how many of `reportIDs` are still pending, in one round trip
    /// and one database snapshot (a sync answer: its state, and whether the request's reports
    /// are resolved yet).
    public func snapshot(
        accountID: String, now: Date = Date(), countingPending reportIDs: [String]
    ) async throws -> (snapshot: Snapshot, pendingOfThese: Int) {
        let query: PostgresQuery =
            """
            SELECT s.state, s.last_sequence, s.resolved_at,
                   (SELECT count(*) FROM reports r WHERE r.account_id = k.id AND r.status = 'pending'),
                   (SELECT count(*) FROM reports r WHERE r.account_id = k.id AND r.status = 'pending'
                      AND r.report_id = ANY(\(reportIDs)::text[])),
                   (SELECT COALESCE(json_agg(json_build_object(
                        'id', d.device_id, 'platform', d.platform, 'app_version', d.app_version,
                        'first_seen_at', d.first_seen_at, 'last_seen_at', d.last_seen_at)
                        ORDER BY d.last_seen_at DESC, d.device_id), '[]')
                    FROM devices d WHERE d.account_id = k.id)
            FROM (SELECT \(accountID)::text AS id) AS k
            LEFT JOIN account_states s ON s.account_id = k.id
            """
        let rows = try await accounts.withConnection(for: accountID) { try await $0.preparedQuery(query) }
        let row = rows[0]
        let devices = try row.decode(JSONColumn<[Device]>.self, at: 5).value
        let pending = try row.decode(Int.self, at: 3)
        let pendingOfThese = try row.decode(Int.self, at: 4)
        let state: AccountState
        let lastSequence: Int64
        let resolvedAt: Date?
        if let stored = try row.decode(JSONColumn<AccountState>?.self, at: 0)?.value {
            state = stored
            lastSequence = try row.decode(Int64.self, at: 1)
            let at = try row.decode(Date.self, at: 2)
            resolvedAt = at == .distantPast ? nil : at
        } else {
            state = Resolver.resolve(transactions: [], catalogue: catalogue, now: now)
            lastSequence = 0
            resolvedAt = nil
        }
        let snapshot = Snapshot(
            accountID: accountID, state: state, devices: devices, lastSequence: lastSequence,
            resolvedAt: resolvedAt, pendingReports: pending)
        return (snapshot, pendingOfThese)
    }
}
