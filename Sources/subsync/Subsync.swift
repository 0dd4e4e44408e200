import ArgumentParser

/// Every command names itself (`commandName`): without one, ArgumentParser derives the name with
/// `String(describing:)` for each command of the tree at every start, and each such call scans
/// the binary's protocol conformance records, milliseconds of each `subsync` start
/// (docs/PERFORMANCE.md, *In the code*).
@main
struct Subsync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subsync",
        abstract: "Keeps one truth about every account's subscriptions across its devices.",
        discussion: """
            Exit codes: 0 success; 1 failure; 2 drift found (reconcile --dry-run); 3 done in part \
            (prune kept reports the state depends on); 64 bad usage; 65 data error (a changed \
            migration file, an invalid value); 66 not found; 69 database unavailable; 75 nothing changed, try again shortly; 130 \
            interrupted (reconcile --all --resume continues).
            """,
        subcommands: [Serve.self, Migrate.self, Distribute.self, Tokens.self, Endpoints.self, Deliveries.self, Replay.self, Reconcile.self, Accounts.self, Usage.self, Credits.self, Revoke.self, Unrevoke.self, Events.self, Stats.self, Reports.self, Prune.self]
    )
}
