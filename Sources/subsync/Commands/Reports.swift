import ArgumentParser
import Foundation
import Logging
import Postgres
import SyncStore

struct Reports: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reports",
        abstract: "Inspect and retry quarantined reports.",
        subcommands: [Quarantined.self, Retry.self]
    )

    struct Quarantined: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "quarantined",
            abstract: "List reports the workers set aside after repeated failures, oldest first.",
            discussion: """
                Examples:
                  subsync reports quarantined
                  subsync reports quarantined --account acct-42 --json
                """
        )
        @OptionGroup var database: DatabaseOptions
        @Option(help: "Only this account's reports.") var account: String?
        @Option(help: "At most this many (1-10000).") var limit: Int = 100
        @Flag(help: "Print machine-readable JSON instead of text.") var json = false

        func validate() throws {
            guard (1...10_000).contains(limit) else { throw ValidationError("--limit must be from 1 to 10000") }
        }

        func run() async throws {
            try await Operator.withPool(database, label: "subsync.reports") { pool in
                let reports = try await QuarantinedReports(pool: pool).list(accountID: account, limit: limit)
                if json {
                    try printJSON(reports)
                } else if reports.isEmpty {
                    print("no quarantined reports")
                } else {
                    for r in reports {
                        print("\(r.accountID)  \(r.reportID)  device \(r.deviceID)  transaction \(r.transactionID)  received \(Operator.time(r.receivedAt))  attempts \(r.attempts)  error: \(r.lastError ?? "-")")
                    }
                }
            }
        }
    }

    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "retry",
            abstract: "Put quarantined reports back in the inbox (pending, attempts 0) and wake the workers.",
            discussion: """
                Exit codes: 0 done; 64 bad usage, or the report id is quarantined in several \
                accounts (pass --account); 66 no such quarantined report.

                Examples:
                  subsync reports retry 6f1c2d7e-...
                  subsync reports retry --all
                  subsync reports retry --all --account acct-42
                """
        )
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "A quarantined report's id.") var id: String?
        @Flag(help: "Every quarantined report (of --account when given).") var all = false
        @Option(help: "The account of the report(s).") var account: String?
        @Flag(help: "Print machine-readable JSON instead of text.") var json = false

        func validate() throws {
            if id != nil && all { throw ValidationError("give a report id or --all, not both") }
            if id == nil && !all { throw ValidationError("give a report id or --all") }
        }

        func run() async throws {
            let count = try await Operator.withPool(database, label: "subsync.reports") { pool in
                try await QuarantinedReports(pool: pool).retry(reportID: id, accountID: account)
            }
            if json { try printJSON(["retried": count]) } else { print("\(count) reports back in the inbox") }
        }
    }
}
