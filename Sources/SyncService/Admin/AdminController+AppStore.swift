import Foundation
import Hummingbird
import SyncCore
import SyncStore

extension AdminController {
    /// `POST /v1/admin/accounts/{id}/reconcile-store`: `subsync reconcile --against-store` for one
    /// account, as the console's account page runs it (docs/STORE.md). Body as for `reconcile`:
    /// `dry_run` (default true), `actor`, `reason`; audited like every admin action. 404
    /// `not_configured` without the App Store Server API, 502 `store_unavailable` when the store
    /// cannot be asked, 409 `purchase_moved` when a purchase changed hands meanwhile.
    func addStoreRoutes(to admin: RouterGroup<SubsyncRequestContext>) {
        admin.post("accounts/:account_id/reconcile-store") { request, context in
            let key = try await requireAdmin(request)
            let accountID = try AccountController.accountID(context)
            let body = try await request.decodeJSON(ReconcileRequest.self, emptyIsObject: true, context: context)
            let actor = try actor(body.actor, key: key)
            let reason = try Self.reason(body.reason)
            guard let storeReconciler else {
                throw APIError(
                    .notFound, code: "not_configured",
                    message: "reconciling against the App Store needs SUBSYNC_APPSTORE_KEY_FILE (and StoreKit verification) on this server")
            }
            guard try await Reconciler(pool: pool, catalogue: catalogue, clock: clock, logger: logger).accountExists(accountID) else {
                throw Self.accountNotFound
            }
            let dryRun = body.dryRun ?? true
            let outcome: AppStoreReconciler.Outcome
            do {
                outcome = try await storeReconciler.reconcile(accountID: accountID, repair: !dryRun)
            } catch let error as AppStoreAPIError {
                throw APIError(.badGateway, code: "store_unavailable", message: "the App Store could not be asked: \(error)")
            } catch let error as TransactionBinder.NotOwned {
                throw APIError(.conflict, code: "purchase_moved", message: error.description)
            }
            let audit = try await OperatorLog(pool: pool).record(
                at: clock.now(), actor: actor, action: dryRun ? "reconcile_store_dry_run" : "reconcile_store", accountID: accountID,
                reason: reason,
                outcome: "\(outcome.differences.count) difference(s) with the App Store"
                    + (dryRun ? "" : "; \(outcome.reportsSubmitted) store report(s) submitted")
                    + (outcome.reportIDsTaken.isEmpty ? "" : "; \(outcome.reportIDsTaken.count) not written, another report holds the id"))
            logger.notice("operator reconciled an account against the App Store", metadata: [
                "account": "\(accountID)", "actor": "\(actor)", "dry_run": "\(dryRun)", "differences": "\(outcome.differences.count)",
            ])
            return try JSONResponse.make(AppStoreReconcileAnswer(
                accountID: accountID, dryRun: dryRun, differences: outcome.differences, reportsSubmitted: outcome.reportsSubmitted,
                reportsAlreadyStored: outcome.reportsAlreadyStored, reportIDsTaken: outcome.reportIDsTaken,
                unverified: outcome.unverified, unknownToStore: outcome.unknownToStore, actor: actor, at: audit.at, audit: audit))
        }
    }

    struct AppStoreReconcileAnswer: Encodable {
        var accountID: String
        var dryRun: Bool
        /// `recomputed`: the store's value.
        var differences: [Difference]
        /// Store reports written for the workers to resolve (0 in a dry run).
        var reportsSubmitted: Int
        /// Store reports an earlier repair wrote already.
        var reportsAlreadyStored: Int
        /// Store reports not written: another report of the account holds the id.
        var reportIDsTaken: [String]
        /// Signed answers that did not verify (ignored).
        var unverified: Int
        /// Original transactions the store does not know.
        var unknownToStore: [String]
        var actor: String
        var at: Date
        var audit: OperatorLog.Action

        enum CodingKeys: String, CodingKey {
            case accountID = "account_id"
            case dryRun = "dry_run"
            case differences
            case reportsSubmitted = "reports_submitted"
            case reportsAlreadyStored = "reports_already_stored"
            case reportIDsTaken = "report_ids_taken"
            case unverified
            case unknownToStore = "unknown_to_store"
            case actor, at, audit
        }
    }
}
