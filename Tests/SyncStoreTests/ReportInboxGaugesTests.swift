import Foundation
import Postgres
import SyncStore
import TestSupport
import Testing

/// What `/metrics` and the console's chart show of the inbox, read from the reports themselves.
@Suite struct ReportInboxGaugesTests {
    @Test func gaugesCountPendingAndQuarantinedReportsAndAgeTheOldestPending() async throws {
        try await withMigratedDatabase { pool, connection in
            let inbox = ReportInbox(pool: pool)
            #expect(try await inbox.gauges() == .init(pendingReports: 0, resolutionLagSeconds: 0, quarantinedReports: 0))

            // Received 90 s and 5 s ago and now, pending; two quarantined; one resolved
            // long ago, which is no lag. The oldest pending is the first to arrive.
            func insert(_ id: String, status: String, receivedSecondsAgo: Int) async throws {
                try await connection.query(
                    """
                    INSERT INTO reports (account_id, report_id, device_id, observed_at, product_id, original_transaction_id,
                                         transaction_id, purchased_at, status, received_at)
                    VALUES ('acct-gauges', \(id), 'd', now(), 'voip.basic.monthly', 't', 't', now(), \(status),
                            now() - make_interval(secs => \(receivedSecondsAgo)))
                    """)
            }
            try await insert("resolved", status: "resolved", receivedSecondsAgo: 3_600)
            try await insert("oldest", status: "pending", receivedSecondsAgo: 90)
            try await insert("q1", status: "quarantined", receivedSecondsAgo: 600)
            try await insert("recent", status: "pending", receivedSecondsAgo: 5)
            try await insert("q2", status: "quarantined", receivedSecondsAgo: 30)
            try await insert("now", status: "pending", receivedSecondsAgo: 0)

            let gauges = try await inbox.gauges()
            #expect(gauges.pendingReports == 3)
            #expect(gauges.quarantinedReports == 2)
            // 90 s, and however long the statements above took on a busy machine.
            #expect(gauges.resolutionLagSeconds >= 90 && gauges.resolutionLagSeconds < 90 + 120, "\(gauges.resolutionLagSeconds)")
        }
    }
}
