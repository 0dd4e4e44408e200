import Foundation
import Postgres
import SyncCore

/// `subsync accounts show|list`: what operators need to see of accounts, in one place.
public struct AccountInspector: Sendable {
    let pool: ConnectionPool
    let catalogue: Catalogue

    public init(pool: ConnectionPool, catalogue: Catalogue) {
        self.pool = pool
        self.catalogue = catalogue
    }

    /// One stored report, as an operator sees it.
    public struct ReportLine: Sendable, Codable {
        public var reportID: String
        public var transactionID: String
        public var deviceID: String
        public var source: String
        public var status: String
        public var receivedAt: Date
        public var observedAt: Date
        public var productID: String
        public var expiresAt: Date?
        public var revokedAt: Date?
        public var verified: Bool
        public var adminAction: String?
        public var adminActor: String?
        public var adminReason: String?
        public var lastError: String?
        /// When a worker (or the admin command itself) joined it; nil while pending or quarantined.
        public var resolvedAt: Date?

        enum CodingKeys: String, CodingKey {
            case reportID = "report_id"
            case transactionID = "transaction_id"
            case deviceID = "device_id"
            case source, status
            case receivedAt = "received_at"
            case observedAt = "observed_at"
            case productID = "product_id"
            case expiresAt = "expires_at"
            case revokedAt = "revoked_at"
            case verified
            case adminAction = "admin_action"
            case adminActor = "admin_actor"
            case adminReason = "admin_reason"
            case lastError = "last_error"
            case resolvedAt = "resolved_at"
        }
    }

    /// A transaction's aggregate and the reports behind it.
    public struct TransactionLine: Sendable, Codable {
        public var transactionID: String
        public var originalTransactionID: String
        public var productID: String
        public var expiresAt: Date?
        public var gracePeriodExpiresAt: Date?
        public var revoked: Bool
        public var isUpgraded: Bool
        /// Reports ever joined (pruned ones included).
        public var reportCount: Int
        public var updatedAt: Date
        /// Stored reports of this transaction, newest first.
        public var reports: [ReportLine]

        enum CodingKeys: String, CodingKey {
            case transactionID = "transaction_id"
            case originalTransactionID = "original_transaction_id"
            case productID = "product_id"
            case expiresAt = "expires_at"
            case gracePeriodExpiresAt = "grace_period_expires_at"
            case revoked
            case isUpgraded = "is_upgraded"
            case reportCount = "report_count"
            case updatedAt = "updated_at"
            case reports
        }
    }

    /// Everything `accounts show` prints.
    public struct Details: Sendable, Codable {
        public var accountID: String
        public var state: AccountState
        public var resolvedAt: Date?
        public var lastSequence: Int64
        public var pendingReports: Int
        public var devices: [AccountReader.Device]
        public var transactions: [TransactionLine]
        /// Reports not joined into any stored transaction (pending or quarantined).
        public var unresolvedReports: [ReportLine]
        /// The latest events, newest first, with their deliveries.
        public var events: [EventLog.Line]
        /// Each meter's balance now (docs/USAGE.md).
        public var usage: [UsageBalance]

        enum CodingKeys: String, CodingKey {
            case accountID = "account_id"
            case state
            case resolvedAt = "resolved_at"
            case lastSequence = "last_sequence"
            case pendingReports = "pending_reports"
            case devices, transactions
            case unresolvedReports = "unresolved_reports"
            case events, usage
        }
    }

    /// The account's details, or nil when nothing is stored for it. At most `reportLimit`
    /// reports (newest first) and `eventLimit` events are read.
    public func details(accountID: String, reportLimit: Int = 500, eventLimit: Int = 20, now: Date = Date()) async throws -> Details? {
        let snapshot = try await AccountReader(pool: pool, catalogue: catalogue).snapshot(accountID: accountID)
        let transactionRows = try await pool.preparedQuery(
            """
            SELECT transaction_id, original_transaction_id, product_id, expires_at, grace_period_expires_at,
                   revoked, is_upgraded, report_count, updated_at
            FROM transactions WHERE account_id = \(accountID) ORDER BY transaction_id
            """
        )
        let reportRows = try await pool.preparedQuery(
            """
            SELECT transaction_id, report_id, device_id, source, status, received_at, observed_at, product_id,
                   expires_at, revoked_at, verified, admin_action, admin_actor, admin_reason, last_error, resolved_at
            FROM reports WHERE account_id = \(accountID)
            ORDER BY received_at DESC, arrival DESC LIMIT \(reportLimit)
            """
        )
        if snapshot.resolvedAt == nil, transactionRows.count == 0, reportRows.count == 0 { return nil }
        var reportsByTransaction: [String: [ReportLine]] = [:]
        var unresolved: [ReportLine] = []
        for row in reportRows {
            let line = ReportLine(
                reportID: try row.decode(String.self, at: 1), transactionID: try row.decode(String.self, at: 0), deviceID: try row.decode(String.self, at: 2),
                source: try row.decode(String.self, at: 3), status: try row.decode(String.self, at: 4),
                receivedAt: try row.decode(Date.self, at: 5), observedAt: try row.decode(Date.self, at: 6),
                productID: try row.decode(String.self, at: 7), expiresAt: try row.decode(Date?.self, at: 8),
                revokedAt: try row.decode(Date?.self, at: 9), verified: try row.decode(Bool.self, at: 10),
                adminAction: try row.decode(String?.self, at: 11), adminActor: try row.decode(String?.self, at: 12),
                adminReason: try row.decode(String?.self, at: 13), lastError: try row.decode(String?.self, at: 14),
                resolvedAt: try row.decode(Date?.self, at: 15))
            if line.status == "resolved" {
                reportsByTransaction[try row.decode(String.self, at: 0), default: []].append(line)
            } else {
                unresolved.append(line)
            }
        }
        let transactions = try transactionRows.map { row in
            let id = try row.decode(String.self, at: 0)
            return TransactionLine(
                transactionID: id, originalTransactionID: try row.decode(String.self, at: 1),
                productID: try row.decode(String.self, at: 2), expiresAt: try row.decode(Date?.self, at: 3),
                gracePeriodExpiresAt: try row.decode(Date?.self, at: 4), revoked: try row.decode(Bool.self, at: 5),
                isUpgraded: try row.decode(Bool.self, at: 6), reportCount: try row.decode(Int.self, at: 7),
                updatedAt: try row.decode(Date.self, at: 8), reports: reportsByTransaction[id] ?? [])
        }
        let events = try await EventLog(pool: pool).list(accountID: accountID, limit: eventLimit)
        return Details(
            accountID: accountID, state: snapshot.state, resolvedAt: snapshot.resolvedAt, lastSequence: snapshot.lastSequence,
            pendingReports: snapshot.pendingReports, devices: snapshot.devices, transactions: transactions,
            unresolvedReports: unresolved, events: events,
            usage: try await UsageLedger(pool: pool, catalogue: catalogue).balances(of: accountID, now: now))
    }

    /// One line of `accounts list`.
    public struct Summary: Sendable, Codable {
        public var accountID: String
        public var tier: String
        /// Entitlements that give access now (as of the last resolution).
        public var activeEntitlements: [String]
        public var resolvedAt: Date?
        public var lastSequence: Int64

        enum CodingKeys: String, CodingKey {
            case accountID = "account_id"
            case tier
            case activeEntitlements = "active_entitlements"
            case resolvedAt = "resolved_at"
            case lastSequence = "last_sequence"
        }
    }

    /// Accounts (optionally of one tier) in account id order, after `cursor`, at most `limit`.
    public func list(tier: String?, after cursor: String = "", limit: Int) async throws -> [Summary] {
        let rows = try await pool.preparedQuery(
            """
            SELECT s.account_id, s.tier, s.resolved_at, s.last_sequence,
                   COALESCE((SELECT json_agg(e.entitlement_id ORDER BY e.entitlement_id) FROM entitlements e
                             WHERE e.account_id = s.account_id AND e.status IN ('active', 'grace_period'))::text, '[]')
            FROM account_states s
            WHERE (\(tier)::text IS NULL OR s.tier = \(tier)) AND s.account_id > \(cursor)
            ORDER BY s.account_id LIMIT \(limit)
            """
        )
        return try rows.map { row in
            let resolvedAt = try row.decode(Date.self, at: 2)
            let entitlements = try row.decode(JSONColumn<[String]>.self, at: 4).value
            return Summary(
                accountID: try row.decode(String.self, at: 0), tier: try row.decode(String.self, at: 1),
                activeEntitlements: entitlements, resolvedAt: resolvedAt == .distantPast ? nil : resolvedAt,
                lastSequence: try row.decode(Int64.self, at: 3))
        }
    }
}
