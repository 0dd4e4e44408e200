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
public struct AppStoreReconciler: Sendable {
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

    public struct Outcome: Sendable {
        public var differences: [Difference] = []
        /// Store reports written (a repair); the workers resolve them.
        public var reportsSubmitted = 0
        /// Store reports a repair found stored already as the store's (an earlier run's): nothing new.
        public var reportsAlreadyStored = 0
        /// Ids of store reports a repair could not write because another report (a device's) holds
        /// the id: those differences are not repaired.
        public var reportIDsTaken: [String] = []
        /// Signed fields that did not verify (nothing was done with them).
        public var unverified = 0
        /// Original transactions the store does not know (`4040010`).
        public var unknownToStore: [String] = []
    }

    /// Compares `accountID`'s stored transactions with the store's, and with `repair` submits the
    /// store's version of every transaction that differs. Only purchases the account owns
    /// (`transaction_owners`) are compared and written.
    public func reconcile(accountID: String, repair: Bool) async throws -> Outcome {
        let stored = try await StoredTransactions.of(accountID, pool: binder.pool)
        var storedByID: [String: TransactionAggregate] = [:]
        for aggregate in stored { storedByID[aggregate.transactionID] = aggregate }
        let originals = try await StoredTransactions.owned(Set(stored.map(\.originalTransactionID)), by: accountID, pool: binder.pool)
        let answers = AppStoreAnswers(api: api, verifier: verifier, binder: binder)
        var outcome = Outcome()
        var fromStore: [String: Report] = [:]
        var covered: Set<String> = []

        // The history, asked again only for an original the answers so far lack.
        for original in originals.sorted() where !covered.contains(original) {
            guard let signed = try await api.allTransactions(transactionID: original) else {
                outcome.unknownToStore.append(original)
                continue
            }
            for jws in signed {
                guard let report = await report(answers, jws, renewal: nil, originals: originals, outcome: &outcome) else { continue }
                fromStore[report.transactionID] = report
                covered.insert(report.originalTransactionID)
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
                guard let report = await report(answers, jws, renewal: last.signedRenewalInfo, originals: originals, outcome: &outcome) else {
                    continue
                }
                fromStore[report.transactionID] = report
            }
        }

        var renewals: [String: RenewalMark] = [:]
        for aggregate in stored where aggregate.renewal != nil {
            renewals[aggregate.originalTransactionID] = RenewalMark.latest(renewals[aggregate.originalTransactionID], aggregate.renewal)
        }
        var repairs: [Report] = []
        for report in fromStore.values.sorted(by: { ($0.originalTransactionID, $0.purchasedAt, $0.transactionID) < ($1.originalTransactionID, $1.purchasedAt, $1.transactionID) }) {
            let differences = Self.compare(
                report, storedByID[report.transactionID], renewal: renewals[report.originalTransactionID], accountID: accountID)
            guard !differences.isEmpty else { continue }
            outcome.differences += differences
            // What wins by signing time is repaired by this answer, whatever was said before: so
            // is a refund reversed, which reinstates as of the answer's signing time (under its
            // facts alone it would be the store's earlier word from before the refund).
            let descriptive = differences.contains {
                $0.field == "transactions.will_auto_renew" || $0.field.hasPrefix("renewal.")
                    || ($0.field == "transactions.revoked_at" && report.revokedAt == nil)
            }
            // (A transaction id too long for the answer's name keeps the fact-named id.)
            repairs.append(descriptive ? (try? AppStoreAnswers.answerNamed(report)) ?? report : report)
        }
        if repair, !repairs.isEmpty {
            let ingested = try await answers.ingest(repairs, accountID: accountID)
            outcome.reportsSubmitted = ingested.submitted.count
            outcome.reportsAlreadyStored = ingested.alreadyStored.count
            outcome.reportIDsTaken = ingested.taken
            logger.notice("reconcile against the store submitted reports", metadata: [
                "account_id": "\(accountID)", "reports": "\(outcome.reportsSubmitted)",
                "already_stored": "\(outcome.reportsAlreadyStored)",
            ])
            if !ingested.taken.isEmpty {
                logger.error("reconcile against the store could not write reports: another report holds their ids", metadata: [
                    "account_id": "\(accountID)", "report_ids": "\(ingested.taken.joined(separator: ", "))",
                ])
            }
        }
        return outcome
    }

    /// ``AppStoreAnswers/report(transaction:renewal:originals:)``, counting what does not verify.
    private func report(_ answers: AppStoreAnswers, _ jws: String, renewal: String?, originals: Set<String>, outcome: inout Outcome) async -> Report? {
        do {
            return try await answers.report(transaction: jws, renewal: renewal, originals: originals)
        } catch {
            outcome.unverified += 1
            logger.warning("a signed answer of the App Store did not verify; ignored", metadata: ["error": "\(error)"])
            return nil
        }
    }

    /// Where the stored transaction and the store's differ, field by field (`recomputed`: the
    /// store's value). A transaction the store has and subsync does not is one difference.
    /// `renewal`: the renewal details the subscription has (signed latest over its transactions),
    /// compared with those of the store's answer when it carries renewal info; when signed, its
    /// auto-renew status is the one the state follows (docs/RESOLUTION.md).
    static func compare(
        _ store: Report, _ stored: TransactionAggregate?, renewal: RenewalMark?, accountID: String
    ) -> [Difference] {
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
        // The store's word against the store's word: an operator's revoke or unrevoke is not the
        // store's to undo, so it is neither a difference nor repaired.
        if (store.revokedAt != nil) != stored.storeSaysRevoked {
            differences.append(difference(
                "transactions.revoked_at", stored.storeRevocation.map { RFC3339.format($0.revokedAt) },
                store.revokedAt.map(RFC3339.format)))
        }
        if store.revokedAt != nil, stored.storeSaysRevoked, let reason = store.revocationReason, stored.storeRevocation?.reason != reason {
            differences.append(difference("transactions.revocation_reason", stored.storeRevocation?.reason?.rawValue, reason.rawValue))
        }
        // Sticky in the join: a store saying "not upgraded" of an upgraded transaction changes
        // nothing, and stays a difference, like an earlier expiry.
        if store.isUpgraded != stored.isUpgraded {
            differences.append(difference("transactions.is_upgraded", String(stored.isUpgraded), String(store.isUpgraded)))
        }
        if store.productID != stored.productID {
            differences.append(difference("transactions.product_id", stored.productID, store.productID))
        }
        let storedRenews = renewal.flatMap { $0.isSigned ? $0.willAutoRenew : nil } ?? stored.willAutoRenew
        if let renews = store.willAutoRenew, storedRenews != renews {
            differences.append(difference("transactions.will_auto_renew", storedRenews.map(String.init), String(renews)))
        }
        if let theirs = store.renewal {
            let ours = renewal?.details ?? RenewalDetails()
            let fields: [(String, String?, String?)] = [
                ("renewal.expiration_reason", ours.expirationReason?.rawValue, theirs.expirationReason?.rawValue),
                ("renewal.renewal_product_id", ours.renewalProductID, theirs.renewalProductID),
                ("renewal.price_increase_status", ours.priceIncreaseStatus?.rawValue, theirs.priceIncreaseStatus?.rawValue),
                ("renewal.renewal_date", ours.renewalDate.map(RFC3339.format), theirs.renewalDate.map(RFC3339.format)),
            ]
            for (field, stored, store) in fields where stored != store {
                differences.append(difference(field, stored, store))
            }
        }
        return differences
    }
}
