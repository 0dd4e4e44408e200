import ArgumentParser
import Foundation
import Logging
import Postgres
import SyncCore
import SyncService
import SyncStore

extension Reconcile {
    /// `reconcile --against-store` (docs/STORE.md): one account or every account with
    /// transactions, compared with the App Store; without `--dry-run` the store's version is
    /// ingested as verified store reports, which the workers of any `serve` resolve and announce.
    func runAgainstStore() async throws {
        let configuration: ServiceConfiguration
        do {
            configuration = try ServiceConfiguration.fromEnvironment()
        } catch {
            printError("\(error)")
            throw ExitCodes.usage
        }
        guard let settings = configuration.appStoreAPI, let bundleID = configuration.bundleID,
            !configuration.appleRootCertificatePaths.isEmpty
        else {
            printError(
                "--against-store needs the App Store Server API (SUBSYNC_APPSTORE_KEY_FILE, _KEY_ID, _ISSUER_ID) and StoreKit verification (SUBSYNC_APPLE_ROOT_CERTIFICATES, SUBSYNC_BUNDLE_ID); docs/STORE.md")
            throw ExitCodes.usage
        }
        let logger = Logger(label: "subsync.reconcile")
        let apiConfiguration: AppStoreAPIConfiguration
        let verifier: StoreKitVerifier
        do {
            apiConfiguration = try settings.configuration(bundleID: bundleID)
            verifier = try StoreKitVerifier(
                rootCertificatePaths: configuration.appleRootCertificatePaths, bundleID: bundleID,
                allowedEnvironments: configuration.storeEnvironments, appAppleID: configuration.appAppleID)
        } catch {
            printError("\(error)")
            throw ExitCodes.usage
        }
        let catalogue = try Operator.catalogue()
        let output = DifferenceOutput(json: json)
        var summary = Summary(dryRun: dryRun)
        summary.storeReportsSubmitted = 0
        summary.storeReportsAlreadyStored = 0
        summary.storeReportIDsTaken = 0
        summary.unverified = 0
        summary.accountsFailed = 0
        let started = ContinuousClock.now
        try await Operator.withPool(database, size: 2, label: "subsync.reconcile") { pool in
            let engine = ResolutionEngine(pool: pool, catalogue: catalogue)
            // Apple's limits are per app: this command takes its slots from the schedule the
            // running serve processes share.
            let api = AppStoreServerAPI(configuration: apiConfiguration, sharedBudget: RateBuckets(pool: pool), logger: logger)
            let reconciler = AppStoreReconciler(
                api: api, verifier: verifier, binder: TransactionBinder(pool: pool, engine: engine, policy: configuration.accountBinding),
                catalogue: catalogue, logger: logger)
            output.begin()
            if let account {
                guard try await Reconciler(pool: pool, catalogue: catalogue).accountExists(account) else {
                    printError("no account \(account)")
                    throw ExitCodes.notFound
                }
                try await check(account, reconciler, output: output, summary: &summary)
                return
            }
            let progress = ProgressDisplay(label: "accounts", total: nil, enabled: !noProgress)
            let interrupt = InterruptFlag()
            interrupt.install()
            var after = ""
            while !interrupt.isSet {
                let accounts = try await StoredTransactions.accounts(after: after, limit: batchSize, pool: pool)
                guard let last = accounts.last else { break }
                for accountID in accounts {
                    if interrupt.isSet { break }
                    try await check(accountID, reconciler, output: output, summary: &summary)
                    progress.update(done: summary.accountsChecked)
                }
                after = last
            }
            if interrupt.isSet { summary.complete = false }
            progress.update(done: summary.accountsChecked, final: true)
        }
        let elapsed = ContinuousClock.now - started
        summary.seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        try output.end(summary)
        if !summary.complete { throw ExitCodes.interrupted }
        if (summary.accountsFailed ?? 0) > 0 { throw ExitCodes.unavailable }
        if (summary.storeReportIDsTaken ?? 0) > 0 { throw ExitCodes.dataError }
        if dryRun && summary.differences > 0 { throw ExitCodes.drift }
    }

    /// One account: its differences printed, the summary counted.
    private func check(_ accountID: String, _ reconciler: AppStoreReconciler, output: DifferenceOutput, summary: inout Summary) async throws {
        let outcome: AppStoreReconciler.Outcome
        do {
            outcome = try await reconciler.reconcile(accountID: accountID, repair: !dryRun)
        } catch let error as PostgresError where error.isConnectionLoss {
            throw error
        } catch {
            // One account the store cannot answer for (or whose purchase moved meanwhile) does
            // not stop the others; the run exits 69 at the end.
            printError("\(accountID): \(error)")
            summary.accountsFailed = (summary.accountsFailed ?? 0) + 1
            return
        }
        output.emit(outcome.differences)
        summary.accountsChecked += 1
        summary.differences += outcome.differences.count
        summary.unverified = (summary.unverified ?? 0) + outcome.unverified
        if !outcome.differences.isEmpty { summary.accountsWithDrift += 1 }
        if outcome.reportsSubmitted > 0 {
            summary.accountsRepaired += 1
            summary.storeReportsSubmitted = (summary.storeReportsSubmitted ?? 0) + outcome.reportsSubmitted
        }
        summary.storeReportsAlreadyStored = (summary.storeReportsAlreadyStored ?? 0) + outcome.reportsAlreadyStored
        summary.storeReportIDsTaken = (summary.storeReportIDsTaken ?? 0) + outcome.reportIDsTaken.count
        for id in outcome.reportIDsTaken {
            printError("\(accountID): not repaired: store report \(id) was not written, another report of the account (not the store's) holds that id")
        }
        for original in outcome.unknownToStore {
            printError("\(accountID): the App Store does not know transaction \(original)")
        }
    }
}
