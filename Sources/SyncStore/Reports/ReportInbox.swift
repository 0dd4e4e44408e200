import Crypto
import Foundation
import Postgres
import SyncCore

/// The durable inbox: reports are committed here before a sync request is answered, and the
/// worker pool resolves them later (docs/ARCHITECTURE.md, "How the pipeline runs").
public struct ReportInbox: Sendable {
    /// The NOTIFY channel that wakes workers when reports arrive.
    public static let channel = "subsync_reports"

    /// An expression: when the oldest pending report was received, NULL when none is pending.
    /// One entry of `reports_pending_by_arrival` (sql/0028; `min(received_at)` read the whole
    /// backlog) for each node's range of `arrival`, which on Citus sorts by node first
    /// (sql/0045). For the resolution lag of `stats` and ``gauges()``.
    static let oldestPendingReceivedAtSQL = "subsync_oldest_pending_received_at()"

    let pool: ConnectionPool
    /// Sends an account's reports and reads to the node that holds it, on Citus (`nil`: all to
    /// ``pool``).
    let router: AccountRouter?
    /// Whether the database is a Citus one: a submission then goes as routed statements.
    let topology = DatabaseTopology()

    public init(pool: ConnectionPool, router: AccountRouter? = nil) {
        self.pool = pool
        self.router = router
    }

    /// Connections for an account's own statements (its node's, on Citus).
    private var accounts: AccountConnections { AccountConnections(pool: pool, router: router) }

    /// What a submission stored.
    public struct Submission: Sendable, Equatable {
        /// Report ids stored by this call.
        public var accepted: [String]
        /// Report ids that were already stored (an idempotent retry); nothing changed for them.
        public var duplicates: [String]

        /// Splits `reportIDs` (in the caller's order; an id repeated in one request counts once)
        /// into the `inserted` ones and the duplicates.
        init(reportIDs: [String], inserted: Set<String>) {
            var seen = Set<String>()
            accepted = []
            duplicates = []
            for id in reportIDs where seen.insert(id).inserted {
                if inserted.contains(id) { accepted.append(id) } else { duplicates.append(id) }
            }
        }
    }

    /// Stores `reports` for `accountID`, idempotently on `(account_id, report_id)`, records the
    /// device as seen, and wakes the workers. The reports must have passed validation.
    ///
    /// On one PostgreSQL it is one statement, so one round trip and atomic on its own: the
    /// device upsert, the report insert and the NOTIFY (sent at commit, only when something new
    /// was stored) are parts of a single `WITH` query. On Citus it is three statements, each
    /// committed on its own (``submitRouted(accountID:device:reports:seenAt:on:)``).
    ///
    /// `seenAt` is the service clock's time of the request, recorded as the device's last contact
    /// (and its first, for a new device: usage cannot be dated before it, docs/USAGE.md); `nil`
    /// takes the database's clock.
    public func submit(accountID: String, device: DeviceInfo, reports unordered: [Report], seenAt: Date? = nil) async throws -> Submission {
        if try await topology.isCitus(pool) {
            // Each statement on its own, without a transaction: on Citus a transaction costs
            // the worker node a `BEGIN` and the coordinator a distributed transaction id, and
            // it would not make the reports and their queue entry one commit anyway (the
            // reports commit on the worker node, the entry on the coordinator: a report left
            // without one is queued by the sweeper, `requeueStalledAccounts`). The device and
            // the reports go to the node that holds the account (`router`), the entry to the
            // coordinator.
            // Once the queue is distributed with the accounts (sql/0047), the entry goes to the
            // account's node too, and only the wake-up to the coordinator, where every `serve`
            // listens (a `NOTIFY` fires on the node that runs it).
            let onNode = router?.queuesOnNodes == true
            let (submission, stored) = try await accounts.withConnection(for: accountID) { connection in
                let (submission, stored) = try await storeRouted(
                    accountID: accountID, device: device, reports: unordered, seenAt: seenAt, on: connection)
                if stored, onNode { try await connection.preparedQuery(PostgresQuery(Self.queueEntrySQL, binds: [accountID.postgresValue])) }
                return (submission, stored)
            }
            if stored, onNode {
                try await pool.notify(channel: Self.channel, payload: accountID)
            } else if stored {
                try await pool.withConnection { try await queueRouted(accountID: accountID, on: $0) }
            }
            return submission
        }
        return try await pool.withConnection { try await submit(accountID: accountID, device: device, reports: unordered, seenAt: seenAt, on: $0) }
    }

    /// ``submit(accountID:device:reports:)`` on `connection`, inside the caller's transaction if
    /// it has one (the NOTIFY is then sent when that transaction commits).
    public func submit(
        accountID: String, device: DeviceInfo, reports unordered: [Report], seenAt: Date? = nil, on connection: Connection
    ) async throws -> Submission {
        if try await topology.isCitus(on: connection) {
            return try await submitRouted(accountID: accountID, device: device, reports: unordered, seenAt: seenAt, on: connection)
        }
        // Key order: concurrent requests with overlapping ids then lock rows in the same order.
        let reports = unordered.sorted { $0.reportID < $1.reportID }
        let binds: [PostgresValue] = [
            accountID.postgresValue, device.id.postgresValue, device.platform.postgresValue, device.appVersion.postgresValue,
            seenAt.postgresValue,
        ] + Self.reportBinds(reports)
        let rows = try await connection.preparedQuery(PostgresQuery(Self.submitSQL(rows: reports.count), binds: binds))
        return Submission(reportIDs: unordered.map(\.reportID), inserted: Set(try rows.map { try $0.decode(String.self, at: 0) }))
    }

    /// The statement of ``submit(accountID:device:reports:on:)`` for `rows` reports, built once
    /// for each count rather than for every request (docs/PERFORMANCE.md, "In the code").
    private static func submitSQL(rows: Int) -> String {
        usesValues(rows) ? submitStatements[rows] : submitSQL(insert: insertSQL(arraysFrom: 6))
    }

    private static let submitStatements: [String] = (0...valuesRowLimit).map { $0 == 0 ? "" : submitSQL(insert: insertSQL(rows: $0, firstParameter: 6)) }

    private static func submitSQL(insert: String) -> String {
        """
        WITH device AS (
            \(deviceSQL)
            RETURNING 1
        ), inserted AS (
            \(insert)
        ), queued AS (
            \(queueSQL)
        ), notified AS (
            -- ::text: Citus materialises this CTE, and a void column cannot be.
            SELECT pg_notify('\(channel)', $1)::text FROM (SELECT 1 FROM inserted LIMIT 1) AS anything
        )
        SELECT report_id, (SELECT count(*) FROM notified), (SELECT count(*) FROM device) FROM inserted
        """
    }

    /// Inserts reports with one statement and returns the ids that were new; for store
    /// notifications and operator commands, inside the caller's transaction.
    public func insert(accountID: String, reports unordered: [Report], on connection: Connection) async throws -> [String] {
        guard !unordered.isEmpty else { return [] }
        let reports = unordered.sorted { $0.reportID < $1.reportID }
        let rows = try await connection.preparedQuery(
            PostgresQuery(
                """
                WITH inserted AS (
                    \(Self.usesValues(reports.count) ? Self.insertSQL(rows: reports.count, firstParameter: 2) : Self.insertSQL(arraysFrom: 2))
                ), queued AS (
                    \(Self.queueSQL)
                )
                SELECT report_id FROM inserted
                """,
                binds: [accountID.postgresValue] + Self.reportBinds(reports))
        )
        return try rows.map { try $0.decode(String.self, at: 0) }
    }

    /// ``submit(accountID:device:reports:seenAt:on:)`` on a Citus cluster, in the caller's
    /// transaction if it has one: the same writes as three statements, the device's and the
    /// reports' each routed to the account's shard, the queue's entry and the wake-up on the
    /// coordinator. Citus plans each part of the one-statement form on its own and passes its
    /// rows through intermediate results, which cost the coordinator several milliseconds a
    /// sync (docs/CITUS.md, "Scale-out: the plan").
    func submitRouted(
        accountID: String, device: DeviceInfo, reports unordered: [Report], seenAt: Date?, on connection: Connection
    ) async throws -> Submission {
        let (submission, stored) = try await storeRouted(accountID: accountID, device: device, reports: unordered, seenAt: seenAt, on: connection)
        if stored { try await queueRouted(accountID: accountID, on: connection) }
        return submission
    }

    /// The device's and the reports' statements of ``submitRouted(accountID:device:reports:seenAt:on:)``,
    /// and whether the account must be queued: a report was new, or a retry's report is still
    /// pending.
    private func storeRouted(
        accountID: String, device: DeviceInfo, reports unordered: [Report], seenAt: Date?, on connection: Connection
    ) async throws -> (Submission, stored: Bool) {
        let reports = unordered.sorted { $0.reportID < $1.reportID }
        try await connection.preparedQuery(PostgresQuery(Self.deviceSQL, binds: [
            accountID.postgresValue, device.id.postgresValue, device.platform.postgresValue, device.appVersion.postgresValue,
            seenAt.postgresValue,
        ]))
        guard !reports.isEmpty else { return (Submission(reportIDs: [], inserted: []), false) }
        let inserted = try await connection.preparedQuery(
            PostgresQuery(Self.insertStatements(reports.count), binds: [accountID.postgresValue] + Self.reportBinds(reports))
        ).map { try $0.decode(String.self, at: 0) }
        let submission = Submission(reportIDs: unordered.map(\.reportID), inserted: Set(inserted))
        guard inserted.isEmpty else { return (submission, true) }
        // Nothing new: a retry. If one of its reports is still pending, the sync that stored
        // it may have failed before its queue entry (the reports commit on the account's node
        // first): queue the account again rather than leave the reports to the sweeper.
        let pending = try await connection.preparedQuery(
            """
            SELECT EXISTS (SELECT 1 FROM reports
                           WHERE account_id = \(accountID) AND status = 'pending' AND report_id = ANY(\(submission.duplicates)::text[]))
            """)
        return (submission, try pending[0].decode(Bool.self, at: 0))
    }

    /// The claim queue's entry and the workers' wake-up: one statement on the coordinator, where
    /// the queue is (until `distribute` distributes it, sql/0047).
    private func queueRouted(accountID: String, on connection: Connection) async throws {
        try await connection.preparedQuery(PostgresQuery(
            "WITH queued AS (\(Self.queueEntrySQL) RETURNING 1) SELECT pg_notify('\(Self.channel)', $1) FROM queued",
            binds: [accountID.postgresValue]))
    }

    /// The claim queue's entry for account `$1`, in its bucket.
    private static let queueEntrySQL = "INSERT INTO account_work (bucket, account_id) VALUES (subsync_work_bucket($1), $1)"

    private static func insertStatements(_ rows: Int) -> String {
        usesValues(rows) ? insertOnlyStatements[rows] : insertSQL(arraysFrom: 2)
    }

    private static let insertOnlyStatements: [String] = (0...valuesRowLimit).map { $0 == 0 ? "" : insertSQL(rows: $0, firstParameter: 2) }

    /// The device's row: `$1` account, `$2` device, `$3` platform, `$4` app version, `$5` seen
    /// at. `last_seen_at` from `EXCLUDED`: Citus refuses `now()` in `DO UPDATE SET` (not immutable).
    private static let deviceSQL = """
        INSERT INTO devices (account_id, device_id, platform, app_version, first_seen_at, last_seen_at)
        VALUES ($1, $2, $3, $4, COALESCE($5::timestamptz, now()), COALESCE($5::timestamptz, now()))
        ON CONFLICT (account_id, device_id) DO UPDATE
        SET last_seen_at = GREATEST(devices.last_seen_at, EXCLUDED.last_seen_at),
            platform = COALESCE(EXCLUDED.platform, devices.platform),
            app_version = COALESCE(EXCLUDED.app_version, devices.app_version)
        """

    /// The claim queue's row for account `$1`, in its bucket, when the `inserted` CTE stored
    /// something (sql/0014: workers claim accounts with work from `account_work`; sql/0043:
    /// buckets).
    private static let queueSQL = """
        INSERT INTO account_work (bucket, account_id)
        SELECT subsync_work_bucket($1), $1 FROM (SELECT 1 FROM inserted LIMIT 1) AS anything RETURNING 1
        """

    /// Queues `accountIDs` for the workers (sql/0014), each once, in its bucket, on `connection`:
    /// for writers that make reports pending other than by inserting them (quarantined reports
    /// sent back), and for accounts a batch or the sweeper queues again. Returns the entries added.
    @discardableResult
    public static func queue(accountIDs: [String], on connection: Connection) async throws -> Int {
        guard !accountIDs.isEmpty else { return 0 }
        return try await connection.preparedQuery(
            """
            INSERT INTO account_work (bucket, account_id)
            SELECT subsync_work_bucket(a), a FROM (SELECT DISTINCT unnest(\(accountIDs)::text[]) AS a) AS queued
            """
        ).affectedRows
    }

    /// The report columns and their array types, in bind order.
    private static let columns: [(name: String, type: String)] = [
        ("report_id", "text"), ("device_id", "text"), ("source", "text"), ("observed_at", "timestamptz"),
        ("product_id", "text"), ("original_transaction_id", "text"), ("transaction_id", "text"),
        ("purchased_at", "timestamptz"), ("expires_at", "timestamptz"), ("grace_period_expires_at", "timestamptz"),
        ("revoked_at", "timestamptz"), ("revocation_reason", "text"), ("is_upgraded", "boolean"),
        ("will_auto_renew", "boolean"), ("in_billing_retry", "boolean"), ("environment", "text"),
        ("signed_transaction", "text"), ("verified", "boolean"), ("signed_date", "timestamptz"), ("admin_action", "text"),
        ("fact_digest", "text"), ("has_renewal", "boolean"), ("expiration_reason", "text"),
        ("renewal_product_id", "text"), ("price_increase_status", "text"), ("renewal_date", "timestamptz"),
        ("renewal_signed_at", "timestamptz"),
    ]

    /// Up to this many reports are inserted as rows of a `VALUES` list, more as column arrays.
    /// A `VALUES` insert whose rows are all one account's goes to that account's shard on Citus
    /// and commits in one phase there; `INSERT … SELECT FROM unnest` goes through the
    /// coordinator and commits in two (docs/CITUS.md, "Scale-out: the plan"). The limit is a sync
    /// request's most reports, so the statement texts stay few: one per count.
    public static let valuesRowLimit = 100

    /// Whether `count` reports go as a `VALUES` list (none go as empty arrays: a list cannot be empty).
    static func usesValues(_ count: Int) -> Bool { (1...valuesRowLimit).contains(count) }

    /// The binds of `reports` for the insert of their count: one per column and row, or one
    /// array per column past ``valuesRowLimit``.
    private static func reportBinds(_ reports: [Report]) -> [PostgresValue] {
        usesValues(reports.count) ? reports.flatMap(values(of:)) : arrays(of: reports)
    }

    /// `INSERT INTO reports ... VALUES ($1, $n::text, ...), ...` for `rows` rows: the account is
    /// `$1`, the rows' values start at `$firstParameter`, one row after another.
    private static func insertSQL(rows: Int, firstParameter: Int) -> String {
        insertSQL(source: "VALUES " + ValuesList.rows(rows, of: columns.map(\.type), from: firstParameter, leading: "$1"))
    }

    /// `INSERT ... SELECT $1, * FROM unnest($n::text[], ...)`: the account is `$1`, the column
    /// arrays start at `$firstArrayParameter`.
    private static func insertSQL(arraysFrom firstArrayParameter: Int) -> String {
        let arrays = columns.enumerated().map { "$\(firstArrayParameter + $0.offset)::\($0.element.type)[]" }
        return insertSQL(source: "SELECT $1, * FROM unnest(\(arrays.joined(separator: ", ")))")
    }

    private static func insertSQL(source: String) -> String {
        """
        INSERT INTO reports (account_id, \(columns.map(\.name).joined(separator: ", ")))
        \(source)
        ON CONFLICT DO NOTHING -- the same report id, or (verified) the same facts: a duplicate
        RETURNING report_id
        """
    }

    /// One report's value per column of ``columns``, in the same order as ``arrays(of:)``.
    private static func values(of report: Report) -> [PostgresValue] {
        [
            report.reportID.postgresValue,
            report.deviceID.postgresValue,
            report.trust.source.rawValue.postgresValue,
            report.observedAt.postgresValue,
            report.productID.postgresValue,
            report.originalTransactionID.postgresValue,
            report.transactionID.postgresValue,
            report.purchasedAt.postgresValue,
            report.expiresAt.postgresValue,
            report.gracePeriodExpiresAt.postgresValue,
            report.revokedAt.postgresValue,
            report.revocationReason?.rawValue.postgresValue ?? .null,
            report.isUpgraded.postgresValue,
            report.willAutoRenew.postgresValue,
            report.inBillingRetry.postgresValue,
            report.environment?.rawValue.postgresValue ?? .null,
            report.signedTransaction.postgresValue,
            report.trust.isVerified.postgresValue,
            report.trust.signedDate.postgresValue,
            report.trust.adminAction?.rawValue.postgresValue ?? .null,
            factDigest(report).postgresValue,
            (report.renewal != nil).postgresValue,
            report.renewal?.expirationReason?.rawValue.postgresValue ?? .null,
            report.renewal?.renewalProductID.postgresValue ?? .null,
            report.renewal?.priceIncreaseStatus?.rawValue.postgresValue ?? .null,
            report.renewal?.renewalDate.postgresValue ?? .null,
            report.renewal?.signedAt.postgresValue ?? .null,
        ]
    }

    /// One array bind per column of ``columns``, in the same order.
    private static func arrays(of reports: [Report]) -> [PostgresValue] {
        [
            reports.map(\.reportID).postgresValue,
            reports.map(\.deviceID).postgresValue,
            reports.map(\.trust.source.rawValue).postgresValue,
            reports.map(\.observedAt).postgresValue,
            reports.map(\.productID).postgresValue,
            reports.map(\.originalTransactionID).postgresValue,
            reports.map(\.transactionID).postgresValue,
            reports.map(\.purchasedAt).postgresValue,
            reports.map(\.expiresAt).postgresValue,
            reports.map(\.gracePeriodExpiresAt).postgresValue,
            reports.map(\.revokedAt).postgresValue,
            reports.map { $0.revocationReason?.rawValue }.postgresValue,
            reports.map(\.isUpgraded).postgresValue,
            reports.map(\.willAutoRenew).postgresValue,
            reports.map(\.inBillingRetry).postgresValue,
            reports.map { $0.environment?.rawValue }.postgresValue,
            reports.map(\.signedTransaction).postgresValue,
            reports.map(\.trust.isVerified).postgresValue,
            reports.map(\.trust.signedDate).postgresValue,
            reports.map { $0.trust.adminAction?.rawValue }.postgresValue,
            reports.map(Self.factDigest).postgresValue,
            reports.map { $0.renewal != nil }.postgresValue,
            reports.map { $0.renewal?.expirationReason?.rawValue }.postgresValue,
            reports.map { $0.renewal?.renewalProductID }.postgresValue,
            reports.map { $0.renewal?.priceIncreaseStatus?.rawValue }.postgresValue,
            reports.map { $0.renewal?.renewalDate }.postgresValue,
            reports.map { $0.renewal?.signedAt }.postgresValue,
        ]
    }

    /// For a verified device report, a digest of everything it says but its report id, device
    /// and observed time: two such reports with one digest are the same facts (a genuine JWS
    /// resent under a fresh id), and the second is a duplicate. `nil` for other reports.
    static func factDigest(_ report: Report) -> String? {
        guard report.trust.isVerified, report.trust.source == .device, report.trust.adminAction == nil else { return nil }
        func flag(_ value: Bool?) -> String { value.map { $0 ? "1" : "0" } ?? "-" }
        let fields: [String] = [
            report.productID, report.originalTransactionID, report.transactionID, time(report.purchasedAt),
            time(report.expiresAt), time(report.gracePeriodExpiresAt), time(report.revokedAt),
            report.revocationReason?.rawValue ?? "-", flag(report.isUpgraded), flag(report.willAutoRenew),
            flag(report.inBillingRetry), report.environment?.rawValue ?? "-", time(report.trust.signedDate),
            report.signedTransaction ?? "-",
        ] + renewalFields(report.renewal)
        // Unit separators cannot occur in the fields (client text with control characters is refused).
        let digest = SHA256.hash(data: Data(fields.joined(separator: "\u{1F}").utf8))
        return HexText.lowercase(digest)
    }

    /// A time as the digest writes it (sql/0007): seconds with six decimals, `-` when absent.
    private static func time(_ date: Date?) -> String {
        date.map { DecimalText.sixDecimals($0.timeIntervalSince1970) } ?? "-"
    }

    /// The digest fields of a report's renewal details: none when it has none, so the digests of
    /// reports stored before renewal details were kept (sql/0040) stay what they were.
    private static func renewalFields(_ renewal: RenewalDetails?) -> [String] {
        guard let renewal else { return [] }
        return [
            "renewal", renewal.expirationReason?.rawValue ?? "-", renewal.renewalProductID ?? "-",
            renewal.priceIncreaseStatus?.rawValue ?? "-", time(renewal.renewalDate), time(renewal.signedAt),
        ]
    }

    /// The source of each report of `accountID` stored under one of `reportIDs`, on the caller's
    /// connection: who holds an id that an insert found taken.
    public func sources(accountID: String, reportIDs: [String], on connection: Connection) async throws -> [String: ReportSource] {
        guard !reportIDs.isEmpty else { return [:] }
        var sources: [String: ReportSource] = [:]
        for row in try await connection.preparedQuery(
            "SELECT report_id, source FROM reports WHERE account_id = \(accountID) AND report_id = ANY(\(reportIDs)::text[])"
        ) {
            sources[try row.decode(String.self, at: 0)] = ReportSource(rawValue: try row.decode(String.self, at: 1))
        }
        return sources
    }

    /// How many of `reportIDs` of `accountID` are still waiting to be resolved.
    public func pendingCount(accountID: String, reportIDs: [String]) async throws -> Int {
        let rows = try await accounts.withConnection(for: accountID) { try await $0.preparedQuery(
            """
            SELECT count(*) FROM reports
            WHERE account_id = \(accountID) AND report_id = ANY(\(reportIDs)::text[]) AND status = 'pending'
            """
        ) }
        return try rows[0].decode(Int.self, at: 0)
    }
}
