import Foundation
import Postgres
import SyncCore

/// Webhook endpoints: create, list, update, delete, rotate and reseal secrets.
public struct EndpointStore: Sendable {
    let pool: ConnectionPool
    /// Seals the signing secrets it stores (``SecretSealer``).
    let sealer: SecretSealer

    public init(pool: ConnectionPool, sealer: SecretSealer = .none) {
        self.pool = pool
        self.sealer = sealer
    }

    /// How long the previous secret keeps signing after a rotation.
    public static let rotationOverlap: TimeInterval = 24 * 3600

    /// A problem with what the caller asked for, naming the field.
    public struct ValidationError: Error, CustomStringConvertible, Equatable {
        public var field: String
        public var message: String
        public var description: String { "\(field): \(message)" }
    }

    /// Checks a webhook URL: absolute http or https with a host, at most 2048 characters.
    /// (Which addresses it may reach is decided at connect time by the delivery client.)
    public static func validate(url: String) throws(ValidationError) {
        guard url.utf8.count <= 2048 else { throw ValidationError(field: "url", message: "is longer than 2048 characters") }
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
              scheme == "http" || scheme == "https"
        else { throw ValidationError(field: "url", message: "must be an absolute http:// or https:// URL") }
        guard let host = components.host, !host.isEmpty else { throw ValidationError(field: "url", message: "must name a host") }
        guard components.user == nil, components.password == nil else {
            throw ValidationError(field: "url", message: "must not contain credentials; authenticate with the signature instead")
        }
    }

    /// Checks an event type filter against the known types.
    public static func validate(eventTypes: [String]?) throws(ValidationError) {
        guard let eventTypes else { return }
        guard !eventTypes.isEmpty else { throw ValidationError(field: "event_types", message: "must not be empty; leave it out for all events") }
        let known = Set(EventType.allCases.map(\.rawValue))
        for type in eventTypes where !known.contains(type) {
            throw ValidationError(field: "event_types", message: "unknown event type \"\(type.prefix(64))\"; known: \(known.sorted().joined(separator: ", "))")
        }
    }

    /// Who changes endpoints, and why: each change is recorded in `operator_actions` (target
    /// `endpoint <id>`) in the transaction that makes it.
    public struct Audit: Sendable {
        public var actor: String
        public var reason: String?
        public var at: Date

        public init(actor: String, reason: String? = nil, at: Date) {
            self.actor = actor
            self.reason = reason
            self.at = at
        }

        /// The `target` of an endpoint's actions.
        public static func target(_ id: UUID) -> String { "endpoint \(id.uuidString.lowercased())" }
    }

    /// Registers an endpoint; returns it with its secret, which is shown only this once.
    public func create(
        url: String, description: String = "", eventTypes: [String]? = nil, audit: Audit? = nil
    ) async throws -> (WebhookEndpoint, WebhookSecret) {
        try Self.validate(url: url)
        try Self.validate(eventTypes: eventTypes)
        guard description.count <= 500 else { throw ValidationError(field: "description", message: "is longer than 500 characters") }
        let secret = WebhookSecret.generate()
        let endpoint = try await writeAndRead(
            """
            INSERT INTO webhook_endpoints (endpoint_id, url, description, event_types, secret)
            VALUES (\(UUID()), \(url), \(description), \(eventTypes)::text[], \(try sealer.seal(secret)))
            RETURNING endpoint_id
            """,
            audit: audit
        ) { _, after in ("endpoint_create", "created for \(after.url), \(Self.describe(after.eventTypes))") }
        guard let endpoint else { throw PostgresError(.client, message: "the new endpoint was not read back") }
        return (endpoint, secret)
    }

    public func list() async throws -> [WebhookEndpoint] {
        try await pool.query("SELECT \(unescaped: Self.columns) FROM webhook_endpoints ORDER BY created_at, endpoint_id")
            .map(endpoint)
    }

    /// The latest changes operators made to endpoint `id` (``Audit``), oldest first.
    public func audit(of id: UUID, limit: Int = 50) async throws -> [OperatorLog.Action] {
        try await OperatorLog(pool: pool).actions(onTarget: Audit.target(id), limit: limit)
    }

    public func get(_ id: UUID) async throws -> WebhookEndpoint? {
        try await pool.query("SELECT \(unescaped: Self.columns) FROM webhook_endpoints WHERE endpoint_id = \(id)").first.map(endpoint)
    }

    /// Changes the given fields; nil leaves a field as it is. Re-enabling clears the failure state.
    public func update(
        _ id: UUID,
        url: String? = nil,
        description: String? = nil,
        eventTypes: [String]?? = nil,
        enabled: Bool? = nil,
        audit: Audit? = nil
    ) async throws -> WebhookEndpoint? {
        if let url { try Self.validate(url: url) }
        if let eventTypes { try Self.validate(eventTypes: eventTypes) }
        if let description, description.count > 500 {
            throw ValidationError(field: "description", message: "is longer than 500 characters")
        }
        let setTypes = eventTypes != nil
        let types: [String]? = eventTypes ?? nil
        let updated = try await writeAndRead(
            """
            UPDATE webhook_endpoints SET
                url = COALESCE(\(url)::text, url),
                description = COALESCE(\(description)::text, description),
                event_types = CASE WHEN \(setTypes)::boolean THEN \(types)::text[] ELSE event_types END,
                enabled = COALESCE(\(enabled)::boolean, enabled),
                disabled_reason = CASE WHEN \(enabled)::boolean IS NULL THEN disabled_reason
                                       WHEN \(enabled)::boolean THEN NULL ELSE 'disabled by an operator' END,
                failing_since = CASE WHEN \(enabled)::boolean = true THEN NULL ELSE failing_since END,
                updated_at = now()
            WHERE endpoint_id = \(id)
            RETURNING endpoint_id
            """,
            id: id, audit: audit, describe: Self.describeUpdate
        )
        // Deliveries of a disabled endpoint are not noted due on Citus (sql/0048): now they are.
        if enabled == true, updated != nil { try await DeliveryStore.noteEveryDueAccount(pool: pool) }
        return updated
    }

    /// What an update did, in words, and its action: `endpoint_enable` / `endpoint_disable` when
    /// that is all it changed, `endpoint_update` otherwise.
    private static func describeUpdate(before: WebhookEndpoint?, after: WebhookEndpoint) -> (action: String, outcome: String) {
        guard let before else { return ("endpoint_update", "updated") }
        var changes: [String] = []
        if before.url != after.url { changes.append("url \(before.url) → \(after.url)") }
        if before.description != after.description { changes.append("description changed") }
        if before.eventTypes != after.eventTypes {
            changes.append("\(describe(before.eventTypes)) → \(describe(after.eventTypes))")
        }
        if before.enabled != after.enabled { changes.append(after.enabled ? "enabled" : "disabled") }
        if changes.isEmpty { return ("endpoint_update", "nothing changed") }
        if changes.count == 1, before.enabled != after.enabled {
            return (after.enabled ? "endpoint_enable" : "endpoint_disable", changes[0])
        }
        return ("endpoint_update", changes.joined(separator: "; "))
    }

    private static func describe(_ eventTypes: [String]?) -> String {
        eventTypes.map { "event types \($0.joined(separator: ", "))" } ?? "all event types"
    }

    /// Runs `write`, a statement that returns the `endpoint_id` it wrote (or nothing), and reads
    /// that endpoint back in the same transaction. Not `RETURNING` the columns: Citus refuses
    /// functions that are not immutable (`array_to_json`) there in a write to a reference table.
    ///
    /// With `audit`, the action and what it did (`describe`, given the endpoint before, when `id`
    /// names it, and after) are recorded in `operator_actions` in the same transaction.
    private func writeAndRead(
        _ write: PostgresQuery, id: UUID? = nil, audit: Audit? = nil,
        describe: @escaping @Sendable (_ before: WebhookEndpoint?, _ after: WebhookEndpoint) -> (action: String, outcome: String)
    ) async throws -> WebhookEndpoint? {
        try await pool.withTransaction { connection in
            var before: WebhookEndpoint?
            if audit != nil, let id {
                before = try await connection.query(
                    "SELECT \(unescaped: Self.columns) FROM webhook_endpoints WHERE endpoint_id = \(id) FOR UPDATE"
                ).first.map(endpoint)
            }
            guard let row = try await connection.query(write).first else { return nil }
            let written = try row.decode(UUID.self, at: 0)
            guard let after = try await connection.query("SELECT \(unescaped: Self.columns) FROM webhook_endpoints WHERE endpoint_id = \(written)")
                .first.map(endpoint)
            else { return nil }
            if let audit {
                let (action, outcome) = describe(before, after)
                _ = try await OperatorLog.record(
                    at: audit.at, actor: audit.actor, action: action, target: Audit.target(written), reason: audit.reason,
                    outcome: outcome, on: connection)
            }
            return after
        }
    }

    /// Deletes an endpoint and cancels its pending deliveries. Returns whether it existed.
    public func delete(_ id: UUID, audit: Audit? = nil) async throws -> Bool {
        try await pool.withTransaction { connection in
            let cancelled = try await connection.query(
                "UPDATE deliveries SET status = 'cancelled', completed_at = now(), last_error = 'endpoint deleted' WHERE endpoint_id = \(id) AND status = 'pending'"
            ).affectedRows
            let deleted = try await connection.query("DELETE FROM webhook_endpoints WHERE endpoint_id = \(id) RETURNING url")
            guard let url = try deleted.first?.decode(String.self, at: 0) else { return false }
            if let audit {
                _ = try await OperatorLog.record(
                    at: audit.at, actor: audit.actor, action: "endpoint_delete", target: Audit.target(id), reason: audit.reason,
                    outcome: "deleted (\(url)); \(cancelled) pending deliveries cancelled", on: connection)
            }
            return true
        }
    }

    /// Replaces the secret; the old one keeps signing beside the new one for 24 hours, so
    /// receivers can switch without losing a delivery. Returns the new secret (shown once).
    public func rotateSecret(_ id: UUID, now: Date = Date(), audit: Audit? = nil) async throws -> (WebhookEndpoint, WebhookSecret)? {
        let secret = WebhookSecret.generate()
        let until = now.addingTimeInterval(Self.rotationOverlap)
        let endpoint = try await writeAndRead(
            """
            UPDATE webhook_endpoints SET
                previous_secret = secret,
                previous_secret_expires_at = \(until),
                secret = \(try sealer.seal(secret)),
                updated_at = now()
            WHERE endpoint_id = \(id)
            RETURNING endpoint_id
            """,
            audit: audit
        ) { _, _ in ("endpoint_rotate_secret", "secret rotated; the previous one signs beside it until \(until.formatted(.iso8601))") }
        return endpoint.map { ($0, secret) }
    }

    /// Seals every stored secret (current and previous) with the current key, opening each with
    /// whichever configured key sealed it, or reading it in clear; for key rotation and for
    /// secrets stored before sealing was configured. Returns how many values were rewritten.
    public func reseal() async throws -> Int {
        try await pool.withTransaction { connection in
            let rows = try await connection.query(
                "SELECT endpoint_id, secret, previous_secret FROM webhook_endpoints ORDER BY endpoint_id FOR UPDATE")
            var rewritten = 0
            for row in rows {
                let id = try row.decode(UUID.self, at: 0)
                var values: [String?] = [try row.decode(String.self, at: 1), try row.decode(String?.self, at: 2)]
                var changed = false
                for index in values.indices {
                    guard let stored = values[index], !sealer.isCurrent(stored) else { continue }
                    values[index] = try sealer.seal(try sealer.open(stored))
                    changed = true
                    rewritten += 1
                }
                if changed {
                    try await connection.query(
                        "UPDATE webhook_endpoints SET secret = \(values[0]), previous_secret = \(values[1]) WHERE endpoint_id = \(id)")
                }
            }
            return rewritten
        }
    }

    static let columns = """
        endpoint_id, url, description, array_to_json(event_types), enabled, disabled_reason, failing_since,
        previous_secret_expires_at, created_at, updated_at, secret,
        CASE WHEN previous_secret_expires_at > now() THEN previous_secret END
        """

    /// The endpoint of a row of ``columns``, its secrets tried with this store's sealer.
    func endpoint(_ row: Row) throws -> WebhookEndpoint {
        let stored = [try row.decode(String.self, at: 10)] + [try row.decode(String?.self, at: 11)].compactMap { $0 }
        return WebhookEndpoint(
            id: try row.decode(UUID.self, at: 0),
            url: try row.decode(String.self, at: 1),
            description: try row.decode(String.self, at: 2),
            eventTypes: try row.decode(JSONColumn<[String]>?.self, at: 3)?.value,
            enabled: try row.decode(Bool.self, at: 4),
            disabledReason: try row.decode(String?.self, at: 5),
            failingSince: try row.decode(Date?.self, at: 6),
            previousSecretExpiresAt: try row.decode(Date?.self, at: 7),
            createdAt: try row.decode(Date.self, at: 8),
            updatedAt: try row.decode(Date.self, at: 9),
            secretReadable: stored.allSatisfy { (try? sealer.open($0)) != nil }
        )
    }
}
