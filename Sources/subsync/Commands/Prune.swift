import ArgumentParser
import Foundation
import Logging
import Postgres
import SyncStore

struct Prune: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prune",
        abstract: "Delete old resolved reports (history retention) without changing the state they prove.",
        discussion: """
            Deletes resolved reports received before now minus --reports-older-than. Pending \
            and quarantined reports are never touched.

            The current state depends on some of them: for every transaction, the reports that \
            determine its aggregate (the representative, the latest expiry, the latest grace \
            end, the latest revocation, the latest reinstatement, one that says upgraded, the \
            first and last observed, the renewal details signed latest; at most nine). Those are kept, so `subsync reconcile` \
            recomputes exactly the same state after a prune. The command says how many it kept \
            and exits 0: keeping them is the retention rule, not a failure. --force deletes them too: the stored aggregates then remain the \
            only record of those facts, and reconcile reports drift for those transactions (do \
            not run reconcile without --dry-run afterwards).

            Exit codes: 0 done as asked (including when it kept reports the state depends on), \
            so cron sees success; 1 failure; 64 bad usage; 69 database unavailable.

            Examples:
              subsync prune --reports-older-than 90d --dry-run
              subsync prune --reports-older-than 90d
              subsync prune --reports-older-than 12h --json
            """
    )
    @OptionGroup var database: DatabaseOptions
    @Option(help: "Age of the reports to delete: a number and s, m, h, d or w (90d, 12h).") var reportsOlderThan: String
    @Flag(help: "Only count what would be deleted and kept.") var dryRun = false
    @Flag(help: "Also delete the reports the current state depends on (reconcile will report drift).") var force = false
    @Flag(help: "Print machine-readable JSON instead of text.") var json = false

    func validate() throws {
        guard Operator.parseDuration(reportsOlderThan) != nil else {
            throw ValidationError("--reports-older-than must be a duration like 90d, 12h, 30m or 2w")
        }
    }

    func run() async throws {
        let cutoff = Date().addingTimeInterval(-(Operator.parseDuration(reportsOlderThan) ?? 0))
        let summary = try await Operator.withPool(database, label: "subsync.prune") { pool in
            try await Pruner(pool: pool).prune(before: cutoff, force: force, dryRun: dryRun)
        }
        if json {
            try printJSON(summary)
        } else {
            let verb = dryRun ? "would delete" : "deleted"
            print("prune: \(summary.eligible) resolved reports received before \(Operator.time(cutoff)) in \(summary.accounts) accounts; \(verb) \(summary.deleted), kept \(summary.kept)")
            if summary.kept > 0 {
                print("prune: kept \(summary.kept) reports of \(summary.transactionsKept) transactions because the current state depends on them (each proves its transaction's aggregate; reconcile needs them); --force deletes them too, after which reconcile reports drift")
            }
        }
    }
}
