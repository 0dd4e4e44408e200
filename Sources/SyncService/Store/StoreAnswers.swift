import Foundation
import Logging
import SyncCore
import SyncStore

/// What the store's signed answers become (docs/STORE.md): verified store reports, written only
/// to the account that owns the purchase. Shared by ``StoreReconciler`` and ``StoreExpiryCheck``.
struct StoreAnswers: Sendable {
    let api: AppStoreServerAPI
    let verifier: StoreKitVerifier
    let binder: TransactionBinder

    /// The purchase is not bound to the account (another account owns it, or none does yet): the
    /// store's answer about it is not this account's to take.
    struct NotOwned: Error, CustomStringConvertible {
        var originalTransactionID: String
        var owner: String?

        var description: String {
            "purchase \(originalTransactionID) is \(owner == nil ? "bound to no account" : "another account's"): the store's answer is not applied"
        }
    }

    /// The environment the API answers for, which every signed transaction must carry.
    var environment: StoreEnvironment {
        switch api.configuration.environment {
        case .production: .production
        case .sandbox: .sandbox
        }
    }

    /// The store report a signed transaction (with its signed renewal info) makes when it is of
    /// one of `originals`; `nil` when it is of another purchase. Throws when a signature, the
    /// environment, the renewal's purchase or the report does not check out.
    func report(transaction jws: String, renewal: String?, originals: Set<String>) async throws -> Report? {
        let transaction = try await verifier.verifyTransaction(jws)
        guard let original = transaction.payload.originalTransactionId, originals.contains(original),
            let id = transaction.payload.transactionId
        else { return nil }
        guard transaction.environment == environment else {
            throw StoreKitVerificationError.wrongEnvironment(transaction.environment.rawValue)
        }
        var report = try transaction.report(reportID: "store", deviceID: NotificationController.deviceID, observedAt: transaction.signedDate, source: .store)
        if let renewal {
            let info = try await verifier.verifyRenewalInfo(renewal) as JWSRenewalInfoPayload
            guard info.originalTransactionId == original else {
                throw StoreKitVerificationError.malformed("the renewal info is of another purchase")
            }
            report.apply(info)
        }
        // Named by the facts, not by Apple's signing time (new on every answer): asking again,
        // from any process, stores nothing new until the store says something new.
        let facts = [
            report.expiresAt.map { String(AppStoreServerAPI.milliseconds($0)) } ?? "-",
            report.revokedAt.map { String(AppStoreServerAPI.milliseconds($0)) } ?? "-",
            report.gracePeriodExpiresAt.map { String(AppStoreServerAPI.milliseconds($0)) } ?? "-",
            report.willAutoRenew.map { $0 ? "1" : "0" } ?? "-", report.inBillingRetry ? "1" : "0",
        ]
        report.reportID = "store:\(id):" + facts.joined(separator: ":")
        try report.validate()
        return report
    }

    /// Writes `reports` (all of one purchase's account) to `accountID` when it owns each purchase,
    /// checked under the purchase's binding lock, so neither a binding nor a transfer happens here;
    /// returns how many were new.
    func ingest(_ reports: [Report], accountID: String) async throws -> Int {
        guard !reports.isEmpty else { return 0 }
        let originals = Set(reports.map(\.originalTransactionID)).sorted()
        return try await binder.pool.withTransaction { connection in
            try await binder.lockPurchases(originals, on: connection)
            for original in originals {
                let owner = try await binder.account(for: PurchaseClaim(originalTransactionID: original, appAccountToken: nil), on: connection)
                guard owner == accountID else { throw NotOwned(originalTransactionID: original, owner: owner) }
            }
            let claims = originals.map { PurchaseClaim(originalTransactionID: $0, appAccountToken: nil) }
            return try await binder.submit(accountID: accountID, device: nil, reports: reports, claims: claims, on: connection).submission.accepted.count
        }
    }
}
