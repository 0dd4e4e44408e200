import ArgumentParser
import Foundation
import Logging
import Postgres
import SyncStore

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Apply pending schema migrations.",
        discussion: """
            Applies the migrations compiled into this binary (from sql/), each in its own \
            transaction, under an advisory lock so concurrent runs are safe. Refuses to run if \
            an applied migration's file has changed since (exit 65).

            Examples:
              subsync migrate --database-url postgresql://subsync@localhost/subsync
              DATABASE_URL=postgresql://localhost/subsync subsync migrate --status --json
            """
    )

    @OptionGroup var database: DatabaseOptions

    @Flag(help: "Only show which migrations are applied and pending; change nothing.")
    var status = false

    @Flag(help: "Print machine-readable JSON instead of text.")
    var json = false

    func run() async throws {
        let logger = Logger(label: "subsync.migrate")
        let pool = try database.makePool(size: 1, logger: logger)
        defer { Task { await pool.close() } }
        let migrator = Migrator(logger: logger)
        do {
            if status {
                let applied = try await pool.withConnection { try await migrator.appliedVersions(connection: $0) }
                let rows = migrator.migrations.map { (name: $0.name, applied: applied[$0.version] != nil) }
                if json {
                    try printJSON(["migrations": rows.map { ["name": $0.name, "status": $0.applied ? "applied" : "pending"] }])
                } else {
                    for row in rows { print("\(row.applied ? "applied" : "pending")  \(row.name)") }
                }
                return
            }
            let outcome = try await migrator.migrate(pool: pool)
            if json {
                try printJSON(["applied": outcome.applied, "already_applied": outcome.alreadyApplied])
            } else if outcome.applied.isEmpty {
                print("schema up to date (\(outcome.alreadyApplied.count) migrations applied)")
            } else {
                for name in outcome.applied { print("applied  \(name)") }
            }
        } catch let error as MigrationError {
            printError(error.description)
            throw ExitCodes.dataError
        } catch {
            throw failureExitCode(for: error)
        }
    }
}

/// Prints a value as JSON on standard output, keys sorted.
func printJSON(_ value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
    print(String(decoding: try encoder.encode(value), as: UTF8.self))
}
