import Crypto
import Foundation
import Logging
import Postgres
import SyncCore
import SyncStore

/// What the store's signed answers become (docs/STORE.md): verified store reports, written only
/// to the account that owns the purchase. Shared by ``AppStoreReconciler`` and ``AppStoreExpiryCheck``.
struct AppStoreAnswers: Sendable {
    let api: AppStoreServerAPI
    let verifier: StoreKitVerifier
    let binder: TransactionBinder

    /// The environment the API answers for, which every signed transaction must carry.
    var environment: StoreEnvironment { api.configuration.storeEnvironment }

    /// The store report a signed transaction (with its signed renewal info) makes when it is of
    /// one of `originals`; `nil` when it is of another purchase. Throws when a signature, the
    /// environment (the transaction's and the renewal info's must be the API's), the renewal's
    /// purchase or the report does not check out.
    func report(transaction jws: String, renewal: String?, originals: Set<String>) async throws -> Report? {
        let transaction = try await verifier.verifyTransaction(jws)
        guard let original = transaction.payload.originalTransactionId, originals.contains(original),
            let id = transaction.payload.transactionId
        else { return nil }
        guard transaction.environment == environment else {
            throw StoreKitVerificationError.environmentMismatch(transaction.environment.rawValue, environment.rawValue)
        }
        var report = try transaction.report(reportID: "store", deviceID: NotificationController.deviceID, observedAt: transaction.signedDate, source: .store)
        if let renewal {
            let info = try await verifier.verifyRenewalInfo(renewal) as JWSRenewalInfoPayload
            guard info.originalTransactionId == original else {
                throw StoreKitVerificationError.malformed("the renewal info is of another purchase")
            }
            // Of the transaction's environment, so of the API's too.
            try StoreKitVerificationError.requireSameEnvironment(info, as: transaction.environment)
            report.apply(info)
        }
        // Named by the facts, not by Apple's signing time (new on every answer): asking again,
        // from any process, stores nothing new until the store says something new.
        report.reportID = ReportNamespace.store + "\(id):" + Self.factsDigest(of: report)
        try report.validate()
        return report
    }

    /// The same store report under an id of its own answer (`.<ms>`: Apple's signing time of it):
    /// for what the store says of auto-renew or renewal details, which win by signing time. Under
    /// its fact-named id it would be a duplicate when the store says again what it said before
    /// something else (auto-renew on, off, on), and the older statement would stand. Throws when
    /// the id would not be a valid report id (a transaction id of over 80 characters).
    static func answerNamed(_ report: Report) throws -> Report {
        var named = report
        let signed = (report.renewal?.signedAt ?? report.trust.signedDate).map { String(AppStoreServerAPI.milliseconds($0)) } ?? "0"
        named.reportID += "." + signed
        try named.validate()
        return named
    }

    /// 16 hex digits of the SHA-256 of every fact of the answer that the per-transaction join
    /// reads (``Report/joinFacts``; not the signing times): two answers that differ in anything
    /// the join would take from them (an upgrade, a revocation's reason, the product) never share
    /// a name, and the later is never dropped as a duplicate of the earlier.
    static func factsDigest(of report: Report) -> String {
        HexText.lowercase(SHA256.hash(data: Data(report.joinFacts.joined(separator: "\u{1F}").utf8)).prefix(8))
    }

    /// What ``ingest(_:accountID:)`` wrote, by report id.
    struct Ingested: Sendable, Equatable {
        /// Stored now: the workers resolve them.
        var submitted: [String] = []
        /// Stored before as the store's own report (an earlier run, not resolved yet or unable to
        /// change what is stored): nothing new.
        var alreadyStored: [String] = []
        /// Held by a report that is not the store's (a device's, sent under the store's id before
        /// such ids were refused): the store's report was not written and changes nothing.
        var taken: [String] = []
    }

    /// Writes `reports` (all of one purchase's account) to `accountID` when it owns each purchase,
    /// checked under the purchase's binding lock, so neither a binding nor a transfer happens here
    /// (``TransactionBinder/submitOwned(_:accountID:)``, which throws ``TransactionBinder/NotOwned``);
    /// says which were written, which were there already, and which ids another report holds.
    func ingest(_ reports: [Report], accountID: String) async throws -> Ingested {
        guard !reports.isEmpty else { return Ingested() }
        let owned = try await binder.submitOwned(reports, accountID: accountID)
        var ingested = Ingested(submitted: owned.submission.accepted)
        for id in owned.submission.duplicates {
            if owned.holders[id] == .store { ingested.alreadyStored.append(id) } else { ingested.taken.append(id) }
        }
        return ingested
    }
}
