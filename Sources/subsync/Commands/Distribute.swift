import ArgumentParser
import Foundation
import Logging
import Postgres
import SyncStore

struct Distribute: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "distribute",
        abstract: "Distribute the schema on a Citus cluster (run on the coordinator, after migrate).",
        discussion: """
            Distributes every per-account table by account_id, co-located with account_states; \
            the global lookups (purchase owners, app account tokens, store notifications, rate \
            buckets) by their own keys; webhook_endpoints as a reference table; then writes the \
            claim queue's buckets, one per shard, and moves queued entries to theirs (run it again \
            after a shard split). Idempotent: a \
            table already distributed is left alone. On a database without the citus extension \
            it changes nothing and says so (exit 0). See docs/CITUS.md, "The distribution step".

            Examples:
              subsync migrate && subsync distribute --database-url postgresql://subsync@coordinator/subsync
            """
    )

    @OptionGroup var database: DatabaseOptions

    @Flag(help: "Print machine-readable JSON instead of text.")
    var json = false

    func run() async throws {
        let logger = Logger(label: "subsync.distribute")
        let pool = try database.makePool(size: 1, logger: logger)
        defer { Task { await pool.close() } }
        do {
            let outcome = try await Distribution(pool: pool).run()
            if json {
                try printJSON(outcome)
            } else if !outcome.citus {
                print("not a Citus database (no citus extension): the schema stays on this server, nothing to do")
            } else {
                for table in outcome.distributed { print("distributed  \(table)") }
                print("\(outcome.distributed.count) tables distributed, \(outcome.alreadyDistributed.count) already were")
                print("claim queue: \(outcome.buckets) buckets, one per shard; \(outcome.requeued) queued entries moved to their bucket")
            }
        } catch let error as Distribution.MissingTable {
            printError(error.description)
            throw ExitCodes.dataError
        } catch {
            throw failureExitCode(for: error)
        }
    }
}
