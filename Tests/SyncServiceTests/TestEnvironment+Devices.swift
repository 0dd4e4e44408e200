import Foundation
import Postgres
import TestSupport

extension TestEnvironment {
    /// Records `devices` of `account` as having first reached the service at `since` (as a sync
    /// then would have): usage they report may be dated back to that moment, no earlier
    /// (docs/USAGE.md, "Late usage").
    func knownDevices(_ devices: [String], of account: String, since: Date) async throws {
        try await pool.preparedQuery(
            """
            INSERT INTO devices (account_id, device_id, first_seen_at, last_seen_at)
            SELECT \(account), d, \(since), \(since) FROM unnest(\(devices)::text[]) AS d
            ON CONFLICT (account_id, device_id) DO UPDATE SET first_seen_at = LEAST(devices.first_seen_at, EXCLUDED.first_seen_at)
            """
        )
    }
}
