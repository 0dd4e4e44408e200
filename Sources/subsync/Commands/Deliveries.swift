import ArgumentParser
import Foundation
import Logging
import Postgres
import SyncStore

struct Deliveries: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deliveries",
        abstract: "Inspect, retry and cancel webhook deliveries.",
        subcommands: [List.self, Retry.self, Cancel.self]
    )

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "List deliveries, newest first.",
            discussion: """
                Examples:
                  subsync deliveries list --status dead
                  subsync deliveries list --endpoint 7d3c... --json
                """
        )
        @OptionGroup var database: DatabaseOptions
        @Option(help: "pending, succeeded, dead or cancelled.") var status: String?
        @Option(help: "Only this endpoint's deliveries.") var endpoint: String?
        @Option(help: "At most this many.") var limit: Int = 100
        @Flag(help: "Print machine-readable JSON instead of text.") var json = false

        func validate() throws {
            if let status, !["pending", "succeeded", "dead", "cancelled"].contains(status) {
                throw ValidationError("--status must be pending, succeeded, dead or cancelled")
            }
            guard (1...10_000).contains(limit) else { throw ValidationError("--limit must be from 1 to 10000") }
        }

        func run() async throws {
            let endpointID = try endpoint.map(parseEndpointID)
            let pool = try database.makePool(size: 1, logger: Logger(label: "subsync.deliveries"))
            defer { Task { await pool.close() } }
            do {
                let deliveries = try await DeliveryStore(pool: pool).list(status: status, endpoint: endpointID, limit: limit)
                if json {
                    try printJSON(deliveries)
                } else if deliveries.isEmpty {
                    print("no deliveries")
                } else {
                    for d in deliveries {
                        let last = d.lastStatusCode.map { "HTTP \($0)" } ?? d.lastError ?? "-"
                        print("\(d.deliveryID)  \(d.status)  attempts \(d.attempts)  \(d.accountID)#\(d.eventSequence) \(d.eventType)  \(d.endpointID.uuidString.lowercased())  last: \(last)")
                    }
                }
            } catch {
                throw failureExitCode(for: error)
            }
        }
    }

    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "retry",
            abstract: "Make deliveries due again now, with a fresh set of attempts.",
            discussion: """
                Examples:
                  subsync deliveries retry 1234
                  subsync deliveries retry --dead
                  subsync deliveries retry --dead --endpoint 7d3c...
                """
        )
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "A delivery id.") var id: Int64?
        @Flag(help: "Every dead delivery.") var dead = false
        @Option(help: "Only this endpoint's deliveries.") var endpoint: String?
        @Flag(help: "Print machine-readable JSON instead of text.") var json = false

        func validate() throws {
            if id != nil, dead { throw ValidationError("give a delivery id or --dead, not both") }
            if id == nil, !dead { throw ValidationError("give a delivery id or --dead") }
        }

        func run() async throws {
            let endpointID = try endpoint.map(parseEndpointID)
            let pool = try database.makePool(size: 1, logger: Logger(label: "subsync.deliveries"))
            defer { Task { await pool.close() } }
            let count: Int
            do {
                count = try await DeliveryStore(pool: pool).retry(deliveryID: id, endpoint: endpointID)
            } catch {
                throw failureExitCode(for: error)
            }
            if json { try printJSON(["retried": count]) } else { print("\(count) deliveries due again") }
            if let id, count == 0 {
                printError("no delivery \(id) that can be retried (unknown, or already succeeded)")
                throw ExitCodes.notFound
            }
        }
    }
}

extension Deliveries {
    struct Cancel: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "cancel",
            abstract: "Give up on a pending delivery, so the account's later events go to its endpoint.",
            discussion: """
                An account's events reach an endpoint in sequence order: while one delivery is \
                retrying, the account's later events to that endpoint wait behind it. Cancelling it \
                lets them go (the receiver then never gets that event from this delivery; \
                `deliveries retry ID` sends it again later, after the ones that went meanwhile). \
                A delivery a delivery loop is sending at that very moment is not cancelled (exit \
                75, nothing changed): cancel it once that attempt is recorded.

                Example:
                  subsync deliveries cancel 1234
                """
        )
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "A pending delivery's id.") var id: Int64
        @Flag(help: "Print machine-readable JSON instead of text.") var json = false

        func run() async throws {
            let pool = try database.makePool(size: 1, logger: Logger(label: "subsync.deliveries"))
            defer { Task { await pool.close() } }
            let outcome: DeliveryStore.CancelOutcome
            do {
                outcome = try await DeliveryStore(pool: pool).cancel(deliveryID: id)
            } catch {
                throw failureExitCode(for: error)
            }
            switch outcome {
            case .cancelled:
                break
            case .notPending:
                printError("no pending delivery \(id) (unknown, or already succeeded, dead or cancelled)")
                throw ExitCodes.notFound
            case .beingSent(let until):
                printError(
                    "delivery \(id) is out with a delivery loop (claimed, maybe on the wire; its lease ends by "
                        + "\(ISO8601DateFormatter().string(from: until))); nothing changed: cancel it again once that loop has recorded its attempt")
                throw ExitCodes.temporaryFailure
            }
            if json { try printJSON(["cancelled": id]) } else { print("delivery \(id) cancelled") }
        }
    }
}

struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Send the events of a time range to an endpoint again.",
        discussion: """
            Creates new deliveries for the events that occurred in [--since, --until), with their \
            original event ids (receivers deduplicate on webhook-id), honouring the endpoint's \
            event types.

            Examples:
              subsync replay --endpoint 7d3c... --since 2026-11-20T00:00:00Z
              subsync replay --endpoint 7d3c... --since 2026-11-20T00:00:00Z --until 2026-11-21T00:00:00Z
            """
    )
    @OptionGroup var database: DatabaseOptions
    @Option(help: "The endpoint id.") var endpoint: String
    @Option(help: "Start of the range (RFC 3339), inclusive.") var since: String
    @Option(help: "End of the range (RFC 3339), exclusive; default now.") var until: String?
    @Flag(help: "Print machine-readable JSON instead of text.") var json = false

    func run() async throws {
        let endpointID = try parseEndpointID(endpoint)
        guard let start = RFC3339.parse(since) else { throw ValidationError("--since must be an RFC 3339 time, e.g. 2026-11-20T00:00:00Z") }
        var end: Date?
        if let until {
            guard let parsed = RFC3339.parse(until) else { throw ValidationError("--until must be an RFC 3339 time") }
            guard parsed > start else { throw ValidationError("--until must be after --since") }
            end = parsed
        }
        let pool = try database.makePool(size: 1, logger: Logger(label: "subsync.replay"))
        defer { Task { await pool.close() } }
        do {
            guard try await EndpointStore(pool: pool).get(endpointID) != nil else {
                printError("no webhook endpoint \(endpoint)")
                throw ExitCodes.notFound
            }
            let count = try await DeliveryStore(pool: pool).replay(endpoint: endpointID, since: start, until: end)
            if json { try printJSON(["replayed": count]) } else { print("\(count) events queued for delivery") }
        } catch let error as ExitCode {
            throw error
        } catch {
            throw failureExitCode(for: error)
        }
    }
}
