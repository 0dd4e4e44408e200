import Foundation
import Postgres
import SyncCore

/// The durable inbox: reports are committed here before a sync request is answered, and the
/// worker pool resolves them later (DESIGN §1: nothing is resolved in the request).
public struct ReportInbox: Sendable {
    /// The NOTIFY channel that wakes workers when reports arrive.
    public static let channel = "subsync_reports"

    let pool: ConnectionPool

    public init(pool: ConnectionPool) {
        self.pool = pool
    }

    /// What a submission stored.
    public struct Submission: Sendable, Equatable {
        /// Report ids stored by this call.
        public var accepted: [String]
        /// Report ids that were already stored (an idempotent retry); nothing changed for them.
        public var duplicates: [String]
    }

    /// Stores `reports` for `accountID` in one transaction, idempotently on
    /// `(account_id, report_id)`, records the device as seen, and wakes the workers.
    /// The reports must have passed validation.
    public func submit(accountID: String, device: DeviceInfo, reports: [Report]) async throws -> Submission {
        try await pool.withTransaction { connection in
            try await connection.preparedQuery(
                """
                INSERT INTO devices (account_id, device_id, platform, app_version)
                VALUES (\(accountID), \(device.id), \(device.platform), \(device.appVersion))
                ON CONFLICT (account_id, device_id) DO UPDATE
                SET last_seen_at = now(),
                    platform = COALESCE(EXCLUDED.platform, devices.platform),
                    app_version = COALESCE(EXCLUDED.app_version, devices.app_version)
                """
            )
            let inserted = try await insert(accountID: accountID, reports: reports, on: connection)
            if !inserted.isEmpty {
                try await connection.notify(channel: Self.channel, payload: accountID)
            }
            let insertedSet = Set(inserted)
            // Keep the caller's order; a report id repeated inside one request counts once.
            var seen = Set<String>()
            var submission = Submission(accepted: [], duplicates: [])
            for report in reports where seen.insert(report.reportID).inserted {
                if insertedSet.contains(report.reportID) {
                    submission.accepted.append(report.reportID)
                } else {
                    submission.duplicates.append(report.reportID)
                }
            }
            return submission
        }
    }

    /// Inserts reports with one statement (`unnest` of column arrays) and returns the ids that
    /// were new. Also used for store notifications and operator commands.
    public func insert(accountID: String, reports unordered: [Report], on connection: Connection) async throws -> [String] {
        guard !unordered.isEmpty else { return [] }
        // Insert in key order: two concurrent requests carrying the same report ids in different
        // orders would otherwise wait on each other's rows and deadlock.
        let reports = unordered.sorted { $0.reportID < $1.reportID }
        let rows = try await connection.preparedQuery(
            """
            INSERT INTO reports (
                account_id, report_id, device_id, source, observed_at, product_id,
                original_transaction_id, transaction_id, purchased_at, expires_at,
                grace_period_expires_at, revoked_at, revocation_reason, is_upgraded,
                will_auto_renew, in_billing_retry, environment, signed_transaction,
                verified, signed_date, admin_action
            )
            SELECT \(accountID), * FROM unnest(
                \(reports.map(\.reportID))::text[],
                \(reports.map(\.deviceID))::text[],
                \(reports.map(\.trust.source.rawValue))::text[],
                \(reports.map(\.observedAt))::timestamptz[],
                \(reports.map(\.productID))::text[],
                \(reports.map(\.originalTransactionID))::text[],
                \(reports.map(\.transactionID))::text[],
                \(reports.map(\.purchasedAt))::timestamptz[],
                \(reports.map(\.expiresAt))::timestamptz[],
                \(reports.map(\.gracePeriodExpiresAt))::timestamptz[],
                \(reports.map(\.revokedAt))::timestamptz[],
                \(reports.map { $0.revocationReason?.rawValue })::text[],
                \(reports.map(\.isUpgraded))::boolean[],
                \(reports.map(\.willAutoRenew))::boolean[],
                \(reports.map(\.inBillingRetry))::boolean[],
                \(reports.map { $0.environment?.rawValue })::text[],
                \(reports.map(\.signedTransaction))::text[],
                \(reports.map(\.trust.isVerified))::boolean[],
                \(reports.map(\.trust.signedDate))::timestamptz[],
                \(reports.map { $0.trust.adminAction?.rawValue })::text[]
            )
            ON CONFLICT (account_id, report_id) DO NOTHING
            RETURNING report_id
            """
        )
        return try rows.map { try $0.decode(String.self, at: 0) }
    }

    /// How many of `reportIDs` of `accountID` are still waiting to be resolved.
    public func pendingCount(accountID: String, reportIDs: [String]) async throws -> Int {
        let rows = try await pool.preparedQuery(
            """
            SELECT count(*) FROM reports
            WHERE account_id = \(accountID) AND report_id = ANY(\(reportIDs)::text[]) AND status = 'pending'
            """
        )
        return try rows[0].decode(Int.self, at: 0)
    }
}
