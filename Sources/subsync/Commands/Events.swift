import ArgumentParser
import Foundation
import Logging
import Postgres
import SyncCore
import SyncStore

struct Events: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract: "Inspect events.",
        subcommands: [List.self]
    )

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "List events, newest first, with the status of their deliveries.",
            discussion: """
                Examples:
                  subsync events list --account acct-42
                  subsync events list --type entitlement.revoked --since 24h
                  subsync events list --since 2026-11-20T00:00:00Z --limit 1000 --json
                """
        )
        @OptionGroup var database: DatabaseOptions
        @Option(help: "Only this account's events.") var account: String?
        @Option(help: "Only this event type (e.g. entitlement.revoked).") var type: String?
        @Option(help: "Only events since this time (RFC 3339, or a duration back from now: 24h, 7d).") var since: String?
        @Option(help: "At most this many (1-10000).") var limit: Int = 50
        @Flag(help: "Print machine-readable JSON instead of text.") var json = false

        func validate() throws {
            guard (1...10_000).contains(limit) else { throw ValidationError("--limit must be from 1 to 10000") }
            if let type, EventType(rawValue: type) == nil {
                throw ValidationError("unknown event type \(type); known: \(EventType.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            if let since { _ = try Operator.parseSince(since) }
        }

        func run() async throws {
            let sinceDate = try since.map { try Operator.parseSince($0) }
            try await Operator.withPool(database, label: "subsync.events") { pool in
                let events = try await EventLog(pool: pool).list(accountID: account, type: type, since: sinceDate, limit: limit)
                if json {
                    try printJSON(events)
                } else if events.isEmpty {
                    print("no events")
                } else {
                    for event in events { print(Events.line(event, showAccount: true)) }
                }
            }
        }
    }

    /// One event for people: `acct-1#3  <time>  entitlement.revoked  premium  origin admin  deliveries: succeeded 1`.
    static func line(_ e: EventLog.Line, showAccount: Bool) -> String {
        let deliveries = e.deliveries.isEmpty
            ? "no deliveries"
            : "deliveries: " + e.deliveries.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        let subject = showAccount ? "\(e.accountID)#\(e.sequence)" : "#\(e.sequence)"
        return "\(subject)  \(Operator.time(e.occurredAt))  \(e.type)\(e.entitlementID.map { "  \($0)" } ?? "")  origin \(e.origin)  \(deliveries)  id \(e.eventID.uuidString.lowercased())"
    }
}
