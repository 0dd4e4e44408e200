import Foundation
import Postgres
import SyncStore
import TestSupport
import Testing

/// The record of handled App Store notifications, against a real database.
@Suite struct AppStoreNotificationStoreTests {
    @Test func aNotificationIsRecordedOnceAndItsAccountCanBeNamedLater() async throws {
        try await withMigratedDatabase { pool, connection in
            let store = AppStoreNotificationStore(pool: pool)
            let first = UUID()
            let other = UUID()
            func record(_ uuid: UUID) -> AppStoreNotificationStore.Record {
                .init(notificationUUID: uuid, type: "DID_RENEW", subtype: nil, originalTransactionID: "8300",
                      signedDate: Date(timeIntervalSince1970: 1_800_000_000), signedPayload: nil)
            }
            #expect(try await store.insert(record(first), status: .applied, accountID: "acct-token"))
            #expect(try await store.insert(record(first), status: .applied, accountID: "acct-token") == false, "a repeat")
            #expect(try await store.insert(record(other), status: .applied, accountID: "acct-token"))
            #expect(try await store.contains(first))
            #expect(try await store.contains(UUID()) == false)

            // The purchase turned out to be another account's: only this notification moves.
            try await pool.withTransaction { connection in
                try await store.assign(first, to: "acct-owner", on: connection)
            }
            let rows = try await connection.query("SELECT notification_uuid::text, account_id FROM store_notifications ORDER BY account_id")
            let accounts = try rows.map { (try $0.decode(String.self, at: 0), try $0.decode(String.self, at: 1)) }
            #expect(accounts.map(\.1) == ["acct-owner", "acct-token"])
            #expect(accounts.first?.0 == first.uuidString.lowercased())
        }
    }
}
