import ArgumentParser
import Foundation
import Logging
import Postgres
import SyncService
import SyncStore

struct Endpoints: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "endpoints",
        abstract: "Manage webhook endpoints.",
        discussion: """
            Examples:
              subsync endpoints create --url https://backend.example.com/hooks --event-type entitlement.activated
              subsync endpoints list --json
              subsync endpoints rotate-secret 7d3c...
              subsync endpoints disable 7d3c...
            """,
        subcommands: [Create.self, List.self, Show.self, Update.self, Enable.self, Disable.self, Delete.self, RotateSecret.self, Reseal.self]
    )

    struct Output: ParsableArguments {
        @OptionGroup var database: DatabaseOptions
        @Flag(help: "Print machine-readable JSON instead of text.")
        var json = false
    }

    /// Who changes an endpoint and why: recorded in operator_actions with the change
    /// (`endpoints show` lists them).
    struct Who: ParsableArguments {
        @Option(help: "Who (recorded with the change; default $USER).") var actor: String?
        @Option(help: "Why (recorded with the change).") var reason: String?

        var audit: EndpointStore.Audit {
            EndpointStore.Audit(actor: Operator.actor(actor), reason: reason, at: Date())
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "create", abstract: "Register an endpoint; prints its secret once.")
        @OptionGroup var output: Output
        @OptionGroup var who: Who
        @Option(help: "The http(s) URL that receives events.") var url: String
        @Option(help: "A note for people.") var description: String = ""
        @Option(name: .customLong("event-type"), help: "Deliver only this event type (repeatable); default all.")
        var eventTypes: [String] = []

        func run() async throws {
            try await withStore(output) { store in
                let (endpoint, secret) = try await store.create(
                    url: url, description: description, eventTypes: eventTypes.isEmpty ? nil : eventTypes, audit: who.audit)
                try show(endpoint, secret: secret, json: output.json)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List endpoints.")
        @OptionGroup var output: Output

        func run() async throws {
            try await withStore(output) { store in
                let endpoints = try await store.list()
                if output.json {
                    try printJSON(endpoints)
                } else if endpoints.isEmpty {
                    print("no webhook endpoints")
                } else {
                    for endpoint in endpoints {
                        let state = endpoint.enabled ? "enabled " : "disabled"
                        let secret = endpoint.secretReadable ? "" : "  SECRET UNREADABLE (deliveries held: restore its key and reseal, or rotate)"
                        print("\(endpoint.id.uuidString.lowercased())  \(state)  \(endpoint.url)  \(endpoint.eventTypes?.joined(separator: ",") ?? "all events")\(secret)")
                    }
                }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "show", abstract: "Show one endpoint, with the latest changes operators made to it.")
        @OptionGroup var output: Output
        @Argument(help: "The endpoint id.") var id: String

        func run() async throws {
            let id = try parseEndpointID(id)
            try await withStore(output) { store in
                guard let endpoint = try await store.get(id) else { throw notFound(id) }
                try show(endpoint, secret: nil, audit: try await store.audit(of: id), json: output.json)
            }
        }
    }

    struct Update: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "update", abstract: "Change an endpoint's URL, description or event types.")
        @OptionGroup var output: Output
        @OptionGroup var who: Who
        @Argument(help: "The endpoint id.") var id: String
        @Option(help: "A new URL.") var url: String?
        @Option(help: "A new description.") var description: String?
        @Option(name: .customLong("event-type"), help: "Replace the event types (repeatable).") var eventTypes: [String] = []
        @Flag(help: "Deliver every event type.") var allEvents = false

        func run() async throws {
            let types: [String]?? = allEvents ? .some(nil) : (eventTypes.isEmpty ? nil : .some(eventTypes))
            try await showAfter(output, id) { store, id in
                try await store.update(id, url: url, description: description, eventTypes: types, audit: who.audit)
            }
        }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "enable", abstract: "Enable an endpoint (clears its failure state).")
        @OptionGroup var output: Output
        @OptionGroup var who: Who
        @Argument(help: "The endpoint id.") var id: String

        func run() async throws {
            try await showAfter(output, id) { store, id in try await store.update(id, enabled: true, audit: who.audit) }
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "disable", abstract: "Disable an endpoint; its deliveries wait until it is enabled.")
        @OptionGroup var output: Output
        @OptionGroup var who: Who
        @Argument(help: "The endpoint id.") var id: String

        func run() async throws {
            try await showAfter(output, id) { store, id in try await store.update(id, enabled: false, audit: who.audit) }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "delete", abstract: "Delete an endpoint and cancel its pending deliveries.")
        @OptionGroup var output: Output
        @OptionGroup var who: Who
        @Argument(help: "The endpoint id.") var id: String

        func run() async throws {
            let id = try parseEndpointID(id)
            try await withStore(output) { store in
                guard try await store.delete(id, audit: who.audit) else { throw notFound(id) }
                if output.json { try printJSON(["deleted": id.uuidString.lowercased()]) } else { print("deleted \(id.uuidString.lowercased())") }
            }
        }
    }

    struct RotateSecret: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-secret",
            abstract: "Replace the signing secret; the old one keeps signing for 24 hours."
        )
        @OptionGroup var output: Output
        @OptionGroup var who: Who
        @Argument(help: "The endpoint id.") var id: String

        func run() async throws {
            let id = try parseEndpointID(id)
            try await withStore(output) { store in
                guard let (endpoint, secret) = try await store.rotateSecret(id, now: Date(), audit: who.audit) else { throw notFound(id) }
                try show(endpoint, secret: secret, json: output.json)
            }
        }
    }
}

extension Endpoints {
    struct Reseal: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "reseal",
            abstract: "Seal every stored webhook secret with the current key of SUBSYNC_SECRET_KEYS.",
            discussion: """
            Opens each secret with whichever configured key sealed it (or reads it in clear, as stored \
            before SUBSYNC_SECRET_KEYS was set) and seals it with the first key. To rotate keys: put \
            the new key first and keep the old one after it, run this, then drop the old key.

            Examples:
              SUBSYNC_SECRET_KEYS="$NEW,$OLD" subsync endpoints reseal
            """
        )
        @OptionGroup var output: Endpoints.Output

        func run() async throws {
            let sealer = try secretSealer()
            guard sealer.isSealing else {
                printError("SUBSYNC_SECRET_KEYS is not set: there is no key to seal with")
                throw ExitCodes.usage
            }
            try await withStore(output) { store in
                let count = try await store.reseal()
                if output.json {
                    print(#"{"resealed": \#(count)}"#)
                } else {
                    print("resealed \(count) webhook secret(s) with the current key")
                }
            }
        }
    }
}

/// The sealer of `SUBSYNC_SECRET_KEYS`, or a usage error naming the bad key.
func secretSealer() throws -> SecretSealer {
    do {
        return try ServiceConfiguration.sealer(from: ProcessInfo.processInfo.environment)
    } catch {
        printError("\(error)")
        throw ExitCodes.usage
    }
}

private func withStore(_ output: Endpoints.Output, _ body: (EndpointStore) async throws -> Void) async throws {
    let sealer = try secretSealer()
    let pool = try output.database.makePool(size: 2, logger: Logger(label: "subsync.endpoints"))
    do {
        try await body(EndpointStore(pool: pool, sealer: sealer))
        await pool.close()
    } catch let error as EndpointStore.ValidationError {
        await pool.close()
        printError(error.description)
        throw ExitCodes.dataError
    } catch let error as ExitCode {
        await pool.close()
        throw error
    } catch {
        await pool.close()
        throw failureExitCode(for: error)
    }
}

/// Runs `action` on the endpoint named by `idText` and shows the endpoint it returns, or
/// exits "not found" when it returns nil.
private func showAfter(
    _ output: Endpoints.Output,
    _ idText: String,
    _ action: (EndpointStore, UUID) async throws -> WebhookEndpoint?
) async throws {
    let id = try parseEndpointID(idText)
    try await withStore(output) { store in
        guard let endpoint = try await action(store, id) else { throw notFound(id) }
        try show(endpoint, secret: nil, json: output.json)
    }
}

private func show(_ endpoint: WebhookEndpoint, secret: WebhookSecret?, audit: [OperatorLog.Action]? = nil, json: Bool) throws {
    if json {
        try printJSON(WebhookEndpointView(endpoint, secret: secret, audit: audit))
        return
    }
    print("id:           \(endpoint.id.uuidString.lowercased())")
    print("url:          \(endpoint.url)")
    print("description:  \(endpoint.description)")
    print("event types:  \(endpoint.eventTypes?.joined(separator: ", ") ?? "all")")
    print("enabled:      \(endpoint.enabled)\(endpoint.disabledReason.map { " (\($0))" } ?? "")")
    if let failing = endpoint.failingSince { print("failing since: \(RFC3339.format(failing))") }
    if !endpoint.secretReadable {
        print("secret:       UNREADABLE with SUBSYNC_SECRET_KEYS: its deliveries are held; put the key that sealed it back and run")
        print("              `subsync endpoints reseal`, or rotate the secret (the receiver must take the new one)")
    }
    if let secret {
        print("secret:       \(secret.text)")
        print("              (shown once: store it now)")
    }
    if let audit {
        print("changes:      \(audit.isEmpty ? "none recorded" : "")")
        for action in audit {
            print("  \(RFC3339.format(action.at))  \(action.actor)  \(action.action)  \(action.outcome)\(action.reason.map { "  (\($0))" } ?? "")")
        }
    }
}

func parseEndpointID(_ text: String) throws -> UUID {
    guard let id = UUID(uuidString: text) else {
        throw ValidationError("endpoint id must be a UUID, got \"\(text)\"")
    }
    return id
}

private func notFound(_ id: UUID) -> ExitCode {
    printError("no webhook endpoint \(id.uuidString.lowercased())")
    return ExitCodes.notFound
}
