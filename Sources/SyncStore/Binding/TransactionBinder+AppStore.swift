import Foundation
import Postgres
import SyncCore

/// What the App Store says on its own, each in one transaction under the purchase's binding lock
/// (``TransactionBinder/lockPurchases(_:on:)``): its notifications, and its answers to the
/// service's questions, which are written only to the account that owns the purchase.
extension TransactionBinder {
    /// The purchase is not bound to the account (another account owns it, or none does yet): the
    /// store's answer about it is not this account's to take.
    public struct NotOwned: Error, Sendable, CustomStringConvertible {
        public var originalTransactionID: String
        public var owner: String?

        public var description: String {
            "purchase \(originalTransactionID) is \(owner == nil ? "bound to no account" : "another account's"): the store's answer is not applied"
        }
    }

    /// What ``submitOwned(_:accountID:)`` stored.
    public struct OwnedSubmission: Sendable, Equatable {
        public var submission: ReportInbox.Submission
        /// The source of the stored report that holds each of the submission's duplicate ids.
        public var holders: [String: ReportSource]
    }

    /// Stores the store's `reports` (all of one account's purchases) for `accountID` when it owns
    /// each purchase, checked under the purchases' binding locks, so that nothing is bound or
    /// moved here.
    /// - Throws: ``NotOwned`` before anything is written.
    public func submitOwned(_ reports: [Report], accountID: String) async throws -> OwnedSubmission {
        let originals = Set(reports.map(\.originalTransactionID)).sorted()
        return try await pool.withTransaction { connection in
            try await lockPurchases(originals, on: connection)
            for original in originals {
                let owner = try await account(for: PurchaseClaim(originalTransactionID: original, appAccountToken: nil), on: connection)
                guard owner == accountID else { throw NotOwned(originalTransactionID: original, owner: owner) }
            }
            let claims = originals.map { PurchaseClaim(originalTransactionID: $0, appAccountToken: nil) }
            let submission = try await submit(accountID: accountID, device: nil, reports: reports, claims: claims, on: connection).submission
            let holders = try await ReportInbox(pool: pool).sources(accountID: accountID, reportIDs: submission.duplicates, on: connection)
            return OwnedSubmission(submission: submission, holders: holders)
        }
    }

    /// The account that owns `claim`'s purchase, found under its binding lock; when none does,
    /// `record` is kept in `notifications` as unmatched, so that a device binding the purchase at
    /// this moment either binds first (and its account is returned) or finds what was kept.
    /// `inserted` is false when the notification was recorded before.
    public func ownerOrKeepUnmatched(
        _ record: AppStoreNotificationStore.Record, claim: PurchaseClaim, in notifications: AppStoreNotificationStore
    ) async throws -> (owner: String?, inserted: Bool) {
        try await pool.withTransaction { connection -> (owner: String?, inserted: Bool) in
            try await lockPurchases([claim.originalTransactionID], on: connection)
            if let owner = try await account(for: claim, on: connection) { return (owner, false) }
            return (nil, try await notifications.insert(record, status: .unmatched, accountID: nil, on: connection))
        }
    }

    /// Records `record` in `notifications` as applied to `accountID` and stores its `report`,
    /// binding `claim`, in one transaction; returns the account the report went to, `nil` when
    /// the notification was recorded before. A purchase another account owns under
    /// ``BindingPolicy/reject`` cannot be refused (Apple cannot be told 409): the notification
    /// and its report go to the owner.
    public func applyNotification(
        _ record: AppStoreNotificationStore.Record, report: Report, to accountID: String, claim: PurchaseClaim,
        in notifications: AppStoreNotificationStore
    ) async throws -> String? {
        try await pool.withTransaction { connection -> String? in
            guard try await notifications.insert(record, status: .applied, accountID: accountID, on: connection) else { return nil }
            do {
                _ = try await submit(accountID: accountID, device: nil, reports: [report], claims: [claim], on: connection)
                return accountID
            } catch let conflict as BindingConflict {
                // The token names one account and the purchase is another's (policy `reject`):
                // Apple cannot be told 409, so the fact goes where the purchase is.
                let owner = conflict.ownerAccountID
                try await notifications.assign(record.notificationUUID, to: owner, on: connection)
                let ownerClaim = PurchaseClaim(originalTransactionID: claim.originalTransactionID, appAccountToken: nil)
                _ = try await submit(accountID: owner, device: nil, reports: [report], claims: [ownerClaim], on: connection)
                return owner
            }
        }
    }
}
