import ArgumentParser
import Foundation
import Logging
import Postgres
import SyncCore
import SyncStore

struct Reconcile: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reconcile",
        abstract: "Recompute accounts from their stored reports; show and repair drift.",
        discussion: """
            For each account, rebuilds every transaction's aggregate from the account's resolved \
            reports (pending reports are the workers' job and are not counted; quarantined ones \
            were never joined), and compares with what is persisted: the aggregates in \
            `transactions`, and `account_states` / `entitlements` against the rebuilt aggregates \
            resolved at the instant the stored state was resolved (so time passing since, such \
            as an expiry the sweeper has not handled yet, is not drift). Prints every \
            difference: account, entitlement or transaction, field, stored and recomputed value.

            Without --dry-run, each drifted account is re-resolved under the workers' own \
            account locks (safe while `subsync serve` runs) with its aggregates rebuilt from the \
            reports, and the events that bring webhook consumers to the repaired state are \
            written with origin 'reconcile'. --dry-run changes nothing and exits 2 when it finds \
            drift, for monitoring.

            --all walks every account in batches (bounded memory), with a progress bar on a \
            terminal (plain progress lines otherwise). Ctrl-C stops after the current batch; \
            progress is saved after every batch, and --resume goes on from there.

            Exit codes: 0 no drift (or drift repaired); 2 drift found with --dry-run; 64 bad \
            usage; 65 with --against-store, a store report not written because another report \
            holds its id (said on stderr; that difference is not repaired); 66 unknown account; \
            69 database unavailable (with --against-store also: accounts the store could not be \
            asked about); 130 interrupted (resumable).

            Examples:
              subsync reconcile --account acct-42 --dry-run
              subsync reconcile --all --dry-run --json > drift.json
              subsync reconcile --all --since 24h
              subsync reconcile --all --resume
            """
    )

    @OptionGroup var database: DatabaseOptions
    @Option(help: "Reconcile this account only.") var account: String?
    @Flag(help: "Reconcile every account.") var all = false
    @Option(help: "With --all: only accounts with reports received since this time (RFC 3339, or a duration back from now: 24h, 7d).")
    var since: String?
    @Flag(help: "Report differences only; change nothing; exit 2 if any.") var dryRun = false
    @Flag(help: "With --all: continue an interrupted run of the same kind from its checkpoint.") var resume = false
    @Option(help: "Accounts per batch (1-10000).") var batchSize: Int = 1000
    @Option(help: "With --all: batches in flight at once (1-8).") var jobs: Int = 2
    @Flag(help: "No progress display.") var noProgress = false
    @Flag(help: "Print machine-readable JSON instead of text.") var json = false
    @Flag(help: "Compare with what the App Store says (its Server API; docs/STORE.md) instead of the stored reports; without --dry-run, ingest the store's version as verified store reports.")
    var againstStore = false

    func validate() throws {
        if againstStore && (since != nil || resume) { throw ValidationError("--since and --resume do not go with --against-store") }
        if account != nil && all { throw ValidationError("give --account or --all, not both") }
        if account == nil && !all { throw ValidationError("give --account A or --all") }
        if account != nil && (since != nil || resume) { throw ValidationError("--since and --resume go with --all") }
        if let since { _ = try Operator.parseSince(since) }
        guard (1...10_000).contains(batchSize) else { throw ValidationError("--batch-size must be from 1 to 10000") }
        guard (1...8).contains(jobs) else { throw ValidationError("--jobs must be from 1 to 8") }
    }

    /// Totals of a run.
    struct Summary: Encodable {
        var dryRun: Bool
        var accountsChecked = 0
        var accountsWithDrift = 0
        var differences = 0
        var accountsRepaired = 0
        var eventsWritten = 0
        var complete = true
        var resumedFrom: String?
        var seconds = 0.0
        /// With --against-store: store reports written for the workers to resolve.
        var storeReportsSubmitted: Int?
        /// With --against-store: store reports an earlier run wrote already (nothing new written).
        var storeReportsAlreadyStored: Int?
        /// With --against-store: store reports not written because another report holds the id.
        var storeReportIDsTaken: Int?
        /// With --against-store: signed fields from the store that did not verify.
        var unverified: Int?
        /// With --against-store: accounts the store could not be asked about (said on stderr).
        var accountsFailed: Int?

        enum CodingKeys: String, CodingKey {
            case dryRun = "dry_run"
            case accountsChecked = "accounts_checked"
            case accountsWithDrift = "accounts_with_drift"
            case differences
            case accountsRepaired = "accounts_repaired"
            case eventsWritten = "events_written"
            case complete
            case resumedFrom = "resumed_from"
            case seconds
            case storeReportsSubmitted = "store_reports_submitted"
            case storeReportsAlreadyStored = "store_reports_already_stored"
            case storeReportIDsTaken = "store_report_ids_taken"
            case unverified
            case accountsFailed = "accounts_failed"
        }
    }

    func run() async throws {
        if againstStore { return try await runAgainstStore() }
        let catalogue = try Operator.catalogue()
        let sinceDate = try since.map { try Operator.parseSince($0) }
        let output = DifferenceOutput(json: json)
        var summary = Summary(dryRun: dryRun)
        try await Operator.withPool(database, size: jobs + 1, label: "subsync.reconcile") { pool in
            let reconciler = Reconciler(pool: pool, catalogue: catalogue)
            let started = ContinuousClock.now
            if let account {
                guard try await reconciler.accountExists(account) else {
                    printError("no account \(account)")
                    throw ExitCodes.notFound
                }
                output.begin()
                let result = try await reconciler.reconcile(accounts: [account], repair: !dryRun)
                output.emit(result.differences)
                summary.add(result)
            } else {
                try await reconcileAll(reconciler, since: sinceDate, output: output, summary: &summary)
            }
            let elapsed = ContinuousClock.now - started
            summary.seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        }
        try output.end(summary)
        if !summary.complete { throw ExitCodes.interrupted }
        if dryRun && summary.differences > 0 { throw ExitCodes.drift }
    }

    private func reconcileAll(_ reconciler: Reconciler, since: Date?, output: DifferenceOutput, summary: inout Summary) async throws {
        // Named by the --since text as given, so `--since 24h --resume` finds its checkpoint.
        let name = "all" + (dryRun ? " --dry-run" : "") + (self.since.map { " since \($0)" } ?? "")
        var checkpoint = Reconciler.Checkpoint(name: name, lastAccountID: "", accountsDone: 0, differences: 0, startedAt: Date())
        if resume {
            if let saved = try await reconciler.checkpoint(named: name) {
                checkpoint = saved
                summary.resumedFrom = saved.lastAccountID
                summary.differences = saved.differences
                printError("resuming '\(name)' after account \(saved.lastAccountID) (\(saved.accountsDone) accounts done)")
            } else {
                printError("no checkpoint for '\(name)'; starting from the beginning")
            }
        }
        let skipped = checkpoint.accountsDone
        let total = try await reconciler.estimatedAccountCount(since: since)
        let progress = ProgressDisplay(label: "accounts", total: total, enabled: !noProgress)
        let interrupt = InterruptFlag()
        interrupt.install()
        output.begin()
        // Up to `jobs` batches in flight, so the database works on one while this process
        // compares another; results are taken in page order, so the checkpoint is always the
        // end of a contiguous run of finished batches.
        var inflight: [(last: String, task: Task<Reconciler.BatchResult, any Error>)] = []
        var cursor = checkpoint.lastAccountID
        var exhausted = false
        let repair = !dryRun
        while true {
            while !exhausted && !interrupt.isSet && inflight.count < jobs {
                let page = try await reconciler.accountPage(after: cursor, since: since, limit: batchSize)
                guard let last = page.last else {
                    exhausted = true
                    break
                }
                cursor = last
                inflight.append((last, Task { try await reconciler.reconcile(accounts: page, repair: repair) }))
            }
            guard !inflight.isEmpty else { break }
            let (last, task) = inflight.removeFirst()
            let result = try await task.value
            output.emit(result.differences)
            summary.add(result)
            checkpoint.lastAccountID = last
            checkpoint.accountsDone += result.accountsChecked
            checkpoint.differences += result.differences.count
            try await reconciler.saveCheckpoint(checkpoint, dryRun: dryRun)
            progress.update(done: checkpoint.accountsDone, skipped: skipped)
            if interrupt.isSet && inflight.isEmpty && !exhausted {
                progress.update(done: checkpoint.accountsDone, skipped: skipped, final: true)
                printError("interrupted after account \(last); continue with: subsync reconcile --all\(dryRun ? " --dry-run" : "")\(self.since.map { " --since \($0)" } ?? "") --resume")
                summary.complete = false
                summary.differences = checkpoint.differences
                return
            }
        }
        progress.update(done: checkpoint.accountsDone, skipped: skipped, final: true)
        summary.differences = checkpoint.differences
        try await reconciler.deleteCheckpoint(named: name)
    }
}

extension Reconcile.Summary {
    mutating func add(_ result: Reconciler.BatchResult) {
        accountsChecked += result.accountsChecked
        accountsWithDrift += result.accountsWithDrift
        differences += result.differences.count
        accountsRepaired += result.accountsRepaired
        eventsWritten += result.eventsWritten
    }
}

/// Streams differences as they are found: text lines, or one JSON document
/// `{"differences": [...], "summary": {...}}` written incrementally, so memory stays bounded.
final class DifferenceOutput {
    private let json: Bool
    private var first = true
    private var begun = false

    init(json: Bool) {
        self.json = json
    }

    func begin() {
        guard !begun else { return }
        begun = true
        if json { print("{\"differences\": [", terminator: "") }
    }

    func emit(_ differences: [Difference]) {
        for difference in differences {
            if json {
                guard let line = try? Operator.compactJSON(difference) else { continue }
                print(first ? "\n  " + line : ",\n  " + line, terminator: "")
                first = false
            } else {
                print(difference.description)
            }
        }
    }

    func end(_ summary: Reconcile.Summary) throws {
        if json {
            begin()
            print(first ? "]," : "\n],")
            print("\"summary\": \(try Operator.compactJSON(summary))}")
        } else {
            // Against the store, a repair is what it submitted, said apart from the differences.
            let againstStore = summary.storeReportsSubmitted != nil
            let verb = summary.dryRun || againstStore ? "found" : "repaired"
            let drift = summary.differences == 0
                ? "no drift"
                : "\(summary.differences) differences in \(summary.accountsWithDrift) accounts \(verb)"
            var line = "reconcile: \(summary.accountsChecked) accounts checked, \(drift)"
            if let submitted = summary.storeReportsSubmitted {
                if !summary.dryRun && summary.differences > 0 {
                    line += ", \(submitted) store reports submitted"
                    if let already = summary.storeReportsAlreadyStored, already > 0 {
                        line += ", \(already) already stored by an earlier run (nothing new)"
                    }
                    if let taken = summary.storeReportIDsTaken, taken > 0 {
                        line += ", \(taken) NOT written: another report holds their id (see above)"
                    }
                }
            } else if !summary.dryRun && summary.accountsRepaired > 0 {
                line += ", \(summary.eventsWritten) events written"
            }
            if let unverified = summary.unverified, unverified > 0 { line += ", \(unverified) signed answers did not verify (ignored)" }
            if let failed = summary.accountsFailed, failed > 0 { line += ", \(failed) accounts could not be checked (see above)" }
            if !summary.complete { line += " (interrupted)" }
            print(line)
        }
    }
}
