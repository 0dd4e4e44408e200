import ArgumentParser
import Foundation
import Postgres
import SyncCore
import SyncStore

struct Usage: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "usage",
        abstract: "Inspect usage balances (minutes and other meters).",
        discussion: """
            Examples:
              subsync usage show acct-42
              subsync usage show acct-42 --period all --json
            """,
        subcommands: [Show.self]
    )

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "show",
            abstract: "Show an account's balance per meter, its periods, open holds and ledger entries.",
            discussion: """
                The balance is computed from the ledger as the API computes it (docs/USAGE.md): \
                allowance first, then rewards, then credits; the rest of a period is overage.

                Exit codes: 0 shown; 64 bad usage; 69 database unavailable.

                Examples:
                  subsync usage show acct-42
                  subsync usage show acct-42 --period all --json
                """
        )
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "The account id.") var account: String
        @Option(help: "current (the period now) or all.") var period: String = "current"
        @Option(help: "How many of the newest entries to show per meter (1-10000).") var limit: Int = 50
        @Flag(help: "Print machine-readable JSON instead of text.") var json = false

        func validate() throws {
            guard ["current", "all"].contains(period) else { throw ValidationError("--period must be current or all") }
            guard (1...10_000).contains(limit) else { throw ValidationError("--limit must be 1 to 10000") }
        }

        struct Report: Encodable {
            var accountID: String
            var balances: [UsageBalance]
            var holds: [UsageHolds.Hold]
            var entries: [UsageEntry]

            enum CodingKeys: String, CodingKey {
                case accountID = "account_id"
                case balances, holds, entries
            }
        }

        func run() async throws {
            let catalogue = try Operator.catalogue()
            let now = Date()
            let report = try await Operator.withPool(database, label: "subsync.usage") { pool in
                let ledger = UsageLedger(pool: pool, catalogue: catalogue)
                let balances = try await ledger.balances(of: account, now: now)
                let holds = try await UsageHolds(pool: pool, catalogue: catalogue).open(of: account, now: now)
                // The newest entries of each meter, of its current period or of all.
                var shown: [UsageEntry] = []
                for balance in balances {
                    let span = period == "all" ? (Date.distantPast, Date.distantFuture)
                        : balance.current.map { ($0.start, $0.end) } ?? (now, now)
                    shown += try await ledger.entries(of: account, meter: balance.meter, from: span.0, to: span.1, limit: limit).entries
                }
                return Report(accountID: account, balances: balances, holds: holds, entries: shown)
            }
            if json {
                try printJSON(report)
                return
            }
            print("account \(account)")
            if catalogue.meters.isEmpty { print("  (the catalogue has no meters)") }
            for balance in report.balances {
                Swift.print(Self.line(balance, held: report.holds.filter { $0.meter == balance.meter }.reduce(0) { $0 + $1.units }))
                let periods = period == "all" ? balance.periods : balance.current.map { [$0] } ?? []
                for p in periods {
                    print("    period \(Operator.time(p.start)) – \(Operator.time(p.end)): allowance \(p.allowance), used \(p.used) "
                        + "(allowance \(p.fromAllowance), rewards \(p.fromRewards), credits \(p.fromCredits), overage \(p.overage))")
                }
            }
            if !report.holds.isEmpty { print("open holds:") }
            for hold in report.holds {
                print("  \(hold.id.uuidString.lowercased())  \(hold.meter) \(hold.units)  device \(hold.deviceID)  expires \(Operator.time(hold.expiresAt))")
            }
            print(period == "all" ? "entries (newest first, at most \(limit) a meter):" : "entries of the current period (newest first, at most \(limit) a meter):")
            if report.entries.isEmpty { print("  (none)") }
            for entry in report.entries {
                let units = entry.units.map(String.init) ?? "unlimited"
                print("  \(Operator.time(entry.at))  \(entry.kind.rawValue)  \(entry.meter) \(units)  \(entry.id)")
            }
        }

        /// One meter's balance in one line (also used by `accounts show`).
        static func line(_ balance: UsageBalance, held: Int) -> String {
            let current = balance.current
            let available = balance.available.map { String(max(0, $0 - held)) } ?? "unlimited"
            var text = "  \(balance.meter): used \(current?.used ?? 0) of \(current?.allowance.description ?? "0")"
            text += ", rewards \(balance.rewards), credits \(balance.credits)\(balance.credits < 0 ? " (NEGATIVE: refunded after being spent)" : "")"
            text += ", held \(held), available \(available), overage \(current?.overage ?? 0)"
            return text
        }
    }
}

struct Credits: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "credits",
        abstract: "Adjust usage credits by operator decision (audited).",
        subcommands: [Adjust.self]
    )

    struct Adjust: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "adjust",
            abstract: "Grant (positive --units) or take back (negative) units of a meter, audited with who and why.",
            discussion: """
                Writes one immutable ledger entry (kind adjustment, into the credit pool: see \
                docs/USAGE.md) with --actor (default $USER) and --reason. --id makes a retry safe: \
                the same id again records nothing; the same id with other units is refused.

                Exit codes: 0 recorded (or already recorded); 64 bad usage; 65 the id is taken \
                with other units; 69 database unavailable.

                Examples:
                  subsync credits adjust --account acct-42 --units 50 --reason "dropped call, ticket 1881"
                  subsync credits adjust --account acct-42 --units -100 --reason "duplicate pack" --id ticket-1882
                """
        )
        @OptionGroup var database: DatabaseOptions
        @Option(help: "The account id.") var account: String
        @Option(parsing: .unconditional, help: "Units to grant (positive) or take back (negative, e.g. --units -20).") var units: Int
        @Option(help: "Why (required; recorded on the entry).") var reason: String
        @Option(help: "The meter (default: the catalogue's first).") var meter: String?
        @Option(help: "Who (recorded; default $USER).") var actor: String?
        @Option(help: "An id for this adjustment, so a retry records it once (default: a new UUID).") var id: String?
        @Flag(help: "Print machine-readable JSON instead of text.") var json = false

        func validate() throws {
            guard !account.isEmpty else { throw ValidationError("--account must not be empty") }
            guard units != 0, units.magnitude <= UInt(UsageUnits.maximum) else {
                throw ValidationError("--units must be a non-zero number of at most \(UsageUnits.maximum) either way")
            }
            guard !reason.trimmingCharacters(in: .whitespaces).isEmpty else { throw ValidationError("--reason must not be empty") }
            if let id, id.isEmpty || id.count > 128 { throw ValidationError("--id must be 1 to 128 characters") }
        }

        func run() async throws {
            let catalogue = try Operator.catalogue()
            guard let meter = meter ?? catalogue.meters.first?.id, catalogue.meter(id: meter) != nil else {
                printError("no meter \(meter ?? "") in the catalogue (known: \(catalogue.meters.map(\.id).joined(separator: ", ")))")
                throw ExitCodes.usage
            }
            let actor = Operator.actor(actor)
            let adjustmentID = id ?? UUID().uuidString.lowercased()
            let outcome: UsageLedger.Adjustment? = try await Operator.withPool(database, label: "subsync.credits") { pool in
                do {
                    return try await UsageLedger(pool: pool, catalogue: catalogue)
                        .adjust(accountID: account, meter: meter, units: units, id: adjustmentID, actor: actor, reason: reason, now: Date())
                } catch is UsageLedger.Conflict {
                    return nil
                }
            }
            guard let result = outcome else {
                printError("adjustment \(adjustmentID) is already recorded for \(account) with other units; nothing recorded")
                throw ExitCodes.dataError
            }
            if json {
                try printJSON(result)
            } else if result.recorded {
                print("\(units > 0 ? "granted" : "took back") \(units.magnitude) \(meter) for \(account) as \(actor) (adjustment \(adjustmentID))")
            } else {
                print("adjustment \(adjustmentID) of \(account) was already recorded; nothing new")
            }
        }
    }
}
