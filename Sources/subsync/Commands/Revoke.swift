import ArgumentParser
import Foundation
import Logging
import Postgres
import SyncCore
import SyncStore

/// What `revoke` and `unrevoke` share.
struct OverrideOptions: ParsableArguments {
    @OptionGroup var database: DatabaseOptions
    @Option(help: "The transaction id.") var transaction: String
    @Option(help: "The account (default: the one account that has this transaction).") var account: String?
    @Option(help: "Why (recorded with the command).") var reason: String?
    @Option(help: "Who (recorded with the command; default $USER).") var actor: String?
    @Flag(help: "Print machine-readable JSON instead of text.") var json = false

    func validate() throws {
        if transaction.isEmpty { throw ValidationError("--transaction must not be empty") }
        if let account, account.isEmpty { throw ValidationError("--account must not be empty") }
    }

    var resolvedActor: String { Operator.actor(actor) }

    func apply(_ action: AdminAction) async throws {
        let catalogue = try Operator.catalogue()
        let result = try await Operator.withPool(database, label: "subsync.admin") { pool in
            try await AdminOverride(pool: pool, catalogue: catalogue)
                .apply(action, transactionID: transaction, accountID: account, actor: resolvedActor, reason: reason)
        }
        if json {
            try printJSON(result)
        } else if !result.recorded {
            print("transaction \(result.transactionID) of \(result.accountID) is \(result.revoked ? "already revoked by an operator" : "not revoked"); nothing recorded")
        } else {
            print("\(action.rawValue)d transaction \(result.transactionID) of \(result.accountID) as \(result.actor) (report \(result.reportID ?? "-")); \(result.eventsWritten) events written")
            if action == .unrevoke && result.revoked {
                printError("the transaction is still revoked: a revocation is dated after this command (check the clocks)")
            }
        }
    }
}

struct Revoke: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke",
        abstract: "Revoke a transaction by operator decision (recorded as an audited admin report).",
        discussion: """
            Records an admin report (source 'admin', action revoke, at now; who: --actor or \
            $USER; why: --reason) with the transaction's current descriptive fields, and resolves \
            the account at once: state, events (origin 'admin') and webhook deliveries in the same \
            transaction. Only an operator's unrevoke lifts it: no report the store or a device signs \
            later does. Revoking a transaction an operator already revoked records nothing. Undo \
            with `subsync unrevoke`.

            Exit codes: 0 done (or nothing to do); 64 bad usage, or the transaction id exists in \
            several accounts (pass --account); 66 no such transaction; 69 database unavailable.

            Examples:
              subsync revoke --transaction 2000000123456789 --reason "chargeback #881"
              subsync revoke --transaction 2000000123456789 --account acct-42 --actor alice --json
            """
    )
    @OptionGroup var options: OverrideOptions

    func run() async throws {
        try await options.apply(.revoke)
    }
}

struct Unrevoke: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unrevoke",
        abstract: "Lift a transaction's revocation by operator decision (recorded as an audited admin report).",
        discussion: """
            The one way back from an operator's revocation, and besides a verified refund reversal \
            from the store's (docs/RESOLUTION.md). Lifts every revocation dated up to now, the \
            operator's and the store's; a later revocation (a new refund) revokes again. Unrevoking a transaction that is not revoked records nothing, so that no \
            pre-emptive unrevoke can cancel a refund a device reports late.

            Exit codes: as for revoke.

            Examples:
              subsync unrevoke --transaction 2000000123456789 --reason "refund reversed by support"
            """
    )
    @OptionGroup var options: OverrideOptions

    func run() async throws {
        try await options.apply(.unrevoke)
    }
}
