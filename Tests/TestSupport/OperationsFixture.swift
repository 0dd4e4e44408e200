import Foundation
import Postgres
import SyncCore
import SyncStore

/// Shared set-up of the operations tests: reports resolved by the real worker path.
public enum OperationsFixture {
    /// Stores `reports` (account, device, report) and resolves them as the workers do.
    public static func ingest(
        _ reports: [(account: String, device: String, report: Report)], pool: ConnectionPool, clock: any ServiceClock = SystemClock()
    ) async throws {
        let inbox = ReportInbox(pool: pool)
        for (key, items) in Dictionary(grouping: reports, by: { "\($0.account)|\($0.device)" }) {
            _ = try await inbox.submit(accountID: items[0].account, device: DeviceInfo(id: items[0].device), reports: items.map(\.report))
            _ = key
        }
        try await drain(pool, clock: clock)
    }

    /// Resolves every pending report.
    public static func drain(_ pool: ConnectionPool, clock: any ServiceClock = SystemClock()) async throws {
        let engine = ResolutionEngine(pool: pool, catalogue: .default, clock: clock)
        while try await engine.resolvePendingBatch(limit: 1000).reportsResolved > 0 {}
    }

    /// A digest of every table reconciliation could touch, to prove a dry run changed nothing.
    public static func fingerprint(_ pool: ConnectionPool) async throws -> String {
        let rows = try await pool.query(
            """
            SELECT (SELECT md5(COALESCE(string_agg(t::text, '|' ORDER BY account_id, transaction_id), '')) FROM transactions t)
                || (SELECT md5(COALESCE(string_agg(s::text, '|' ORDER BY account_id), '')) FROM account_states s)
                || (SELECT md5(COALESCE(string_agg(e::text, '|' ORDER BY account_id, entitlement_id), '')) FROM entitlements e)
                || (SELECT md5(COALESCE(string_agg(v::text, '|' ORDER BY account_id, sequence), '')) FROM events v)
                || (SELECT md5(COALESCE(string_agg(r::text, '|' ORDER BY account_id, report_id), '')) FROM reports r)
                || (SELECT count(*) FROM deliveries)::text
            """
        )
        return try rows[0].decode(String.self, at: 0)
    }

    /// Subscribes a webhook endpoint to every event, so resolutions write deliveries.
    public static func addEndpoint(_ pool: ConnectionPool) async throws {
        try await pool.query(
            """
            INSERT INTO webhook_endpoints (endpoint_id, url, secret)
            VALUES (\(UUID()), 'http://127.0.0.1:9/hooks', 'whsec_dGVzdHRlc3R0ZXN0dGVzdHRlc3R0ZXN0dGVzdA==')
            """
        )
    }

    /// Every difference reduced to (account, scope, subject, field), sorted.
    public static func keys(_ differences: [Difference]) -> [String] {
        differences.map { "\($0.accountID)|\($0.scope.rawValue)|\($0.transactionID ?? $0.entitlementID ?? "-")|\($0.field)" }.sorted()
    }

    /// Every account id with anything stored.
    public static func allAccounts(_ reconciler: Reconciler) async throws -> [String] {
        var cursor = ""
        var all: [String] = []
        while true {
            let page = try await reconciler.accountPage(after: cursor, since: nil, limit: 7)
            guard let last = page.last else { return all }
            all += page
            cursor = last
        }
    }

    public static let day: TimeInterval = 86_400
}
