import Foundation
import Postgres

/// The distribution step for Citus, run after the migrations on the coordinator by
/// `subsync distribute`: apart from the migrations, which stay plain PostgreSQL, idempotent (a
/// table already distributed is left as it is), and nothing without the `citus` extension.
/// Where every table goes, and why: docs/CITUS.md, "The distribution step".
public struct Distribution: Sendable {
    public enum Placement: Sendable, Equatable, Codable {
        /// Hash-distributed by `column`, co-located with another table (`none`: a group of its
        /// own; `nil`: the anchor of a new group).
        case distributed(column: String, colocatedWith: String?)
        case reference
    }

    /// Tables in the order they are distributed (the co-location anchor first).
    public static let plan: [(table: String, placement: Placement)] = [
        ("account_states", .distributed(column: "account_id", colocatedWith: nil)),
        ("devices", .distributed(column: "account_id", colocatedWith: "account_states")),
        ("reports", .distributed(column: "account_id", colocatedWith: "account_states")),
        ("transactions", .distributed(column: "account_id", colocatedWith: "account_states")),
        ("entitlements", .distributed(column: "account_id", colocatedWith: "account_states")),
        ("events", .distributed(column: "account_id", colocatedWith: "account_states")),
        ("deliveries", .distributed(column: "account_id", colocatedWith: "account_states")),
        ("delivery_attempts", .distributed(column: "account_id", colocatedWith: "account_states")),
        ("usage_entries", .distributed(column: "account_id", colocatedWith: "account_states")),
        ("usage_holds", .distributed(column: "account_id", colocatedWith: "account_states")),
        ("usage_periods", .distributed(column: "account_id", colocatedWith: "account_states")),
        ("usage_totals", .distributed(column: "account_id", colocatedWith: "account_states")),
        ("store_expiry_checks", .distributed(column: "account_id", colocatedWith: "account_states")),
        ("transaction_owners", .distributed(column: "original_transaction_id", colocatedWith: "none")),
        ("app_account_tokens", .distributed(column: "app_account_token", colocatedWith: "none")),
        ("store_notifications", .distributed(column: "notification_uuid", colocatedWith: "none")),
        ("rate_buckets", .distributed(column: "key", colocatedWith: "none")),
        ("webhook_endpoints", .reference),
    ]

    /// What one run did.
    public struct Outcome: Sendable, Equatable, Codable {
        /// False on a database without the `citus` extension: nothing was done.
        public var citus: Bool
        /// Tables distributed (or made reference tables) by this run.
        public var distributed: [String]
        /// Tables that already were.
        public var alreadyDistributed: [String]

        enum CodingKeys: String, CodingKey {
            case citus, distributed
            case alreadyDistributed = "already_distributed"
        }
    }

    /// A table the plan names that the schema does not have: the binary and the database disagree.
    public struct MissingTable: Error, CustomStringConvertible {
        public var table: String
        public var description: String { "table \(table) does not exist: run subsync migrate first" }
    }

    let pool: ConnectionPool

    public init(pool: ConnectionPool) {
        self.pool = pool
    }

    /// Distributes every table of ``plan`` not distributed yet.
    public func run() async throws -> Outcome {
        try await pool.withConnection { connection in
            let citus = try await connection.preparedQuery("SELECT count(*) FROM pg_extension WHERE extname = 'citus'")
            guard try citus[0].decode(Int64.self, at: 0) > 0 else {
                return Outcome(citus: false, distributed: [], alreadyDistributed: [])
            }
            var outcome = Outcome(citus: true, distributed: [], alreadyDistributed: [])
            for (table, placement) in Self.plan {
                let exists = try await connection.preparedQuery("SELECT to_regclass(\(table)) IS NOT NULL")
                guard try exists[0].decode(Bool.self, at: 0) else { throw MissingTable(table: table) }
                let done = try await connection.preparedQuery(
                    "SELECT count(*) FROM pg_dist_partition WHERE logicalrelid = to_regclass(\(table))")
                if try done[0].decode(Int64.self, at: 0) > 0 {
                    outcome.alreadyDistributed.append(table)
                    continue
                }
                switch placement {
                case .distributed(let column, let colocatedWith):
                    try await connection.preparedQuery(
                        "SELECT create_distributed_table(\(table), \(column), colocate_with => \(colocatedWith ?? "default"))")
                case .reference:
                    try await connection.preparedQuery("SELECT create_reference_table(\(table))")
                }
                outcome.distributed.append(table)
            }
            return outcome
        }
    }
}
