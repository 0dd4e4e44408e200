import Foundation
import Logging
import Postgres
import SyncCore
import SyncStore

/// `subsync reconcile --against-store` (docs/STORE.md, "Reconcile against the store"): what the
/// App Store says of an account's purchases, compared with what subsync stored, and with
/// `repair`, ingested as verified store reports through the normal path (inbox, workers, events,
/// webhooks), so a repair is announced like any change.
///
/// For the account's original transactions it asks Get Transaction History (the customer's
/// purchases in the app: asked once, and again only for originals the first answer lacks) and
/// Get All Subscription Statuses (the latest transaction of each subscription with its signed
/// renewal info). Every signed field is verified like a device report; what does not verify is
/// counted and changes nothing. Only purchases the account already has are compared: the history
/// of an Apple ID can hold purchases of other accounts (a shared device), which are not this
/// account's to take.
public struct StoreReconciler: Sendable {
    let api: AppStoreServerAPI
    let verifier: StoreKitVerifier
    let binder: TransactionBinder
    let catalogue: Catalogue
    let logger: Logger

    public init(api: AppStoreServerAPI, verifier: StoreKitVerifier, binder: TransactionBinder, catalogue: Catalogue, logger: Logger) {
        self.api = api
        self.verifier = verifier
        self.binder = binder
        self.catalogue = catalogue
        self.logger = logger
    }

    /// The device id of reports the store makes.
    static let deviceID = NotificationController.deviceID

    public struct Outcome: Sendable {
        public var differences: [Difference] = []
        /// Store reports written (a repair); the workers resolve them.
        public var reportsSubmitted = 0
        /// Signed fields that did not verify (nothing was done with them).
        public var unverified = 0
        /// Original transactions the store does not know (`4040010`).
        public var unknownToStore: [String] = []
    }

    /// Compares `accountID`'s stored transactions with the store's, and with `repair` submits the
    /// store's version of every transaction that differs.
    public func reconcile(accountID: String, repair: Bool) async throws -> Outcome {
        let stored = try await StoredTransactions.of(accountID, pool: binder.pool)
        var storedByID: [String: TransactionAggregate] = [:]
        for aggregate in stored { storedByID[aggregate.transactionID] = aggregate }
        let originals = Set(stored.map(\.originalTransactionID))
        var outcome = Outcome()
        var fromStore: [String: Report] = [:]

        // The history, asked again only for an original the answers so far lack.
        for original in originals.sorted() where !fromStore.values.contains(where: { $0.originalTransactionID == original }) {
            guard let signed = try await api.allTransactions(transactionID: original) else {
                outcome.unknownToStore.append(original)
                continue
            }
            for jws in signed {
                guard let report = await report(jws, renewal: nil, originals: originals, outcome: &outcome) else { continue }
                fromStore[report.transactionID] = report
            }
        }
        // The latest transaction of each subscription, with what its renewal info signs.
        let subscriptions = originals.filter { original in
            stored.contains { $0.originalTransactionID == original && catalogue.products[$0.productID]?.kind == .autoRenewable }
        }
        var asked: Set<String> = []
        for original in subscriptions.sorted() where !asked.contains(original) {
            guard let statuses = try await api.subscriptionStatuses(transactionID: original) else { continue }
            for last in statuses.data.flatMap(\.lastTransactions) {
                guard let jws = last.signedTransactionInfo else { continue }
                if let id = last.originalTransactionId { asked.insert(id) }
                guard let report = await report(jws, renewal: last.signedRenewalInfo, originals: originals, outcome: &outcome) else { continue }
                fromStore[report.transactionID] = report
            }
        }

        var repairs: [Report] = []
        for report in fromStore.values.sorted(by: { ($0.originalTransactionID, $0.purchasedAt, $0.transactionID) < ($1.originalTransactionID, $1.purchasedAt, $1.transactionID) }) {
            let differences = Self.compare(report, storedByID[report.transactionID], accountID: accountID)
            guard !differences.isEmpty else { continue }
            outcome.differences += differences
            repairs.append(report)
        }
        if repair, !repairs.isEmpty {
            let claims = Set(repairs.map(\.originalTransactionID)).sorted().map { PurchaseClaim(originalTransactionID: $0, appAccountToken: nil) }
            let submitted = try await binder.submit(accountID: accountID, device: nil, reports: repairs, claims: claims)
            outcome.reportsSubmitted = submitted.submission.accepted.count
            logger.notice("reconcile against the store submitted reports", metadata: [
                "account_id": "\(accountID)", "reports": "\(outcome.reportsSubmitted)",
            ])
        }
        return outcome
    }

    /// The store report a verified signed transaction (and renewal info) makes, if it is one of
    /// the account's purchases; `nil` (counted) when it does not verify.
    private func report(_ jws: String, renewal: String?, originals: Set<String>, outcome: inout Outcome) async -> Report? {
        do {
            let transaction = try await verifier.verifyTransaction(jws)
            guard let original = transaction.payload.originalTransactionId, originals.contains(original),
                let id = transaction.payload.transactionId
            else { return nil }
            var report = try transaction.report(
                reportID: "store:\(id):\(AppStoreServerAPI.milliseconds(transaction.signedDate))", deviceID: Self.deviceID,
                observedAt: transaction.signedDate, source: .store)
            if let renewal {
                let info = try await verifier.verifyRenewalInfo(renewal) as JWSRenewalInfoPayload
                if info.originalTransactionId == nil || info.originalTransactionId == original { report.apply(info) }
            }
            try report.validate()
            return report
        } catch {
            outcome.unverified += 1
            logger.warning("a signed field from the App Store did not verify; ignored", metadata: ["error": "\(error)"])
            return nil
        }
    }

    /// Where the stored transaction and the store's differ, field by field (`recomputed`: the
    /// store's value). A transaction the store has and subsync does not is one difference.
    static func compare(_ store: Report, _ stored: TransactionAggregate?, accountID: String) -> [Difference] {
        func difference(_ field: String, _ stored: String?, _ store: String?) -> Difference {
            Difference(accountID: accountID, scope: .transaction, transactionID: storeID, field: field, stored: stored, recomputed: store)
        }
        let storeID = store.transactionID
        guard let stored else {
            return [difference("transactions.row", nil, "\(store.productID) expires \(store.expiresAt.map(RFC3339.format) ?? "never")")]
        }
        var differences: [Difference] = []
        if let expires = store.expiresAt, stored.expiresAt.map({ abs($0.timeIntervalSince(expires)) >= 0.001 }) ?? true {
            differences.append(difference("transactions.expires_at", stored.expiresAt.map(RFC3339.format), RFC3339.format(expires)))
        }
        if (store.revokedAt != nil) != stored.isRevoked {
            differences.append(difference(
                "transactions.revoked_at", stored.latestRevokedAt.map(RFC3339.format) ?? (stored.isRevoked ? "revoked" : nil),
                store.revokedAt.map(RFC3339.format)))
        }
        if let renews = store.willAutoRenew, stored.willAutoRenew != renews {
            differences.append(difference("transactions.will_auto_renew", stored.willAutoRenew.map(String.init), String(renews)))
        }
        return differences
    }
}
