import ArgumentParser
import Foundation
import Logging
import Postgres
import SyncCore
import SyncStore

struct Accounts: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accounts",
        abstract: "Inspect accounts.",
        discussion: """
            Examples:
              subsync accounts show acct-42
              subsync accounts show acct-42 --json | jq .transactions
              subsync accounts list --tier premium --limit 20
            """,
        subcommands: [Show.self, List.self]
    )

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "show",
            abstract: "Show an account: resolved state, transactions with their reports and devices, recent events and their deliveries.",
            discussion: """
                Exit codes: 0 shown; 66 nothing is stored for this account; 64 bad usage; 69 database unavailable.

                Examples:
                  subsync accounts show acct-42
                  subsync accounts show acct-42 --events 100 --json
                """
        )
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "The account id.") var account: String
        @Option(help: "Recent events to show (1-1000).") var events: Int = 20
        @Option(help: "Newest reports to show (1-10000).") var reports: Int = 500
        @Flag(help: "Print machine-readable JSON instead of text.") var json = false

        func validate() throws {
            guard (1...1000).contains(events) else { throw ValidationError("--events must be from 1 to 1000") }
            guard (1...10_000).contains(reports) else { throw ValidationError("--reports must be from 1 to 10000") }
        }

        func run() async throws {
            let catalogue = try Operator.catalogue()
            try await Operator.withPool(database, label: "subsync.accounts") { pool in
                guard let details = try await AccountInspector(pool: pool, catalogue: catalogue)
                    .details(accountID: account, reportLimit: reports, eventLimit: events)
                else {
                    printError("no account \(account)")
                    throw ExitCodes.notFound
                }
                if json { try printJSON(details) } else { Self.print(details) }
            }
        }

        static func print(_ d: AccountInspector.Details) {
            let state = d.state
            Swift.print("account \(d.accountID)  tier \(state.tier)  ads \(state.ads ? "yes" : "no")")
            Swift.print("  resolved at \(Operator.time(d.resolvedAt)), last event #\(d.lastSequence), \(d.pendingReports) pending reports, next transition \(Operator.time(state.nextTransitionAt))")
            Swift.print("  features: \(state.features.joined(separator: ", "))")
            Swift.print("entitlements:")
            if state.entitlements.isEmpty { Swift.print("  (none)") }
            for e in state.entitlements {
                var line = "  \(e.id)  \(e.status.rawValue)  \(e.productID)  expires \(Operator.time(e.expiresAt))  source \(e.sourceTransactionID)"
                if e.willRenew {
                    line += "  renews"
                    if let date = e.renewalDate { line += " \(Operator.time(date))" }
                    if let product = e.renewalProductID, product != e.productID { line += " to \(product)" }
                }
                if let reason = e.expirationReason { line += "  ended: \(reason.rawValue)" }
                if let status = e.priceIncreaseStatus { line += "  price increase \(status.rawValue)" }
                if let grace = e.gracePeriodExpiresAt { line += "  grace until \(Operator.time(grace))" }
                if let revokedAt = e.revokedAt { line += "  revoked \(Operator.time(revokedAt))\(e.revocationReason.map { " (\($0.rawValue))" } ?? "")" }
                Swift.print(line)
            }
            Swift.print("devices:")
            if d.devices.isEmpty { Swift.print("  (none)") }
            for device in d.devices {
                Swift.print("  \(device.id)  \(device.platform ?? "-") \(device.appVersion ?? "-")  first seen \(Operator.time(device.firstSeenAt))  last seen \(Operator.time(device.lastSeenAt))")
            }
            Swift.print("transactions:")
            if d.transactions.isEmpty { Swift.print("  (none)") }
            for t in d.transactions {
                var flags: [String] = []
                if t.revoked { flags.append("REVOKED") }
                if t.isUpgraded { flags.append("upgraded") }
                Swift.print("  \(t.transactionID)  \(t.productID)  expires \(Operator.time(t.expiresAt))\(flags.isEmpty ? "" : "  " + flags.joined(separator: " "))  (\(t.reportCount) reports joined)")
                for r in t.reports { Swift.print("    " + line(r)) }
            }
            if !d.unresolvedReports.isEmpty {
                Swift.print("unresolved reports:")
                for r in d.unresolvedReports { Swift.print("  \(r.status)  " + line(r) + (r.lastError.map { "  error: \($0)" } ?? "")) }
            }
            if !d.usage.isEmpty {
                Swift.print("usage (holds: subsync usage show):")
                for balance in d.usage { Swift.print(Usage.Show.line(balance, held: 0)) }
            }
            Swift.print("recent events:")
            if d.events.isEmpty { Swift.print("  (none)") }
            for e in d.events { Swift.print("  " + Events.line(e, showAccount: false)) }
        }

        static func line(_ r: AccountInspector.ReportLine) -> String {
            var text = "\(r.reportID)  from \(r.source == "device" ? "device \(r.deviceID)" : r.source)"
            if r.verified { text += " (verified)" }
            if let action = r.adminAction {
                text += "  \(action) by \(r.adminActor ?? "?")\(r.adminReason.map { ": \"\($0)\"" } ?? "")"
            }
            text += "  observed \(Operator.time(r.observedAt))  received \(Operator.time(r.receivedAt))"
            if let expiresAt = r.expiresAt { text += "  expires \(Operator.time(expiresAt))" }
            if let revokedAt = r.revokedAt { text += "  revoked \(Operator.time(revokedAt))" }
            return text
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "List accounts in id order, optionally of one tier.",
            discussion: """
                Examples:
                  subsync accounts list --tier premium
                  subsync accounts list --limit 1000 --after acct-999 --json
                """
        )
        @OptionGroup var database: DatabaseOptions
        @Option(help: "Only accounts of this tier (as resolved).") var tier: String?
        @Option(help: "At most this many (1-10000).") var limit: Int = 100
        @Option(help: "Start after this account id (for paging).") var after: String = ""
        @Flag(help: "Print machine-readable JSON instead of text.") var json = false

        func validate() throws {
            guard (1...10_000).contains(limit) else { throw ValidationError("--limit must be from 1 to 10000") }
        }

        func run() async throws {
            let catalogue = try Operator.catalogue()
            if let tier, !catalogue.tiers.contains(where: { $0.id == tier }) {
                printError("unknown tier \(tier); the catalogue has \(catalogue.tiers.map(\.id).joined(separator: ", "))")
                throw ExitCodes.usage
            }
            try await Operator.withPool(database, label: "subsync.accounts") { pool in
                let accounts = try await AccountInspector(pool: pool, catalogue: catalogue).list(tier: tier, after: after, limit: limit)
                if json {
                    try printJSON(accounts)
                } else if accounts.isEmpty {
                    print("no accounts")
                } else {
                    for a in accounts {
                        let active = a.activeEntitlements.isEmpty ? "-" : a.activeEntitlements.joined(separator: ",")
                        print("\(a.accountID)  \(a.tier)  active: \(active)  resolved \(Operator.time(a.resolvedAt))  events \(a.lastSequence)")
                    }
                }
            }
        }
    }
}
