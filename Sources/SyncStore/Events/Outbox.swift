import Foundation
import NIOConcurrencyHelpers
import Postgres
import SyncCore

/// The outbox: events are written in the transaction that made them, each with one delivery per
/// subscribed, enabled endpoint, so an event is delivered if and only if it was committed.
/// Resolution, usage writers and binding all write their events here; delivery workers wait on
/// ``deliveriesChannel``.
public enum Outbox {
    /// The NOTIFY channel that tells delivery workers new deliveries exist.
    public static let deliveriesChannel = "subsync_deliveries"

    /// Set by ``write(_:origin:encodedStates:on:)`` when it wrote a delivery, for the task that
    /// runs the transaction: ``AccountConnections`` wakes the delivery loops from the
    /// coordinator after a transaction on a worker node that wrote some.
    @TaskLocal static var deliveriesWritten: DeliveriesWritten?

    /// Whether this process keeps due deliveries by bucket (sql/0048, on Citus after `subsync
    /// distribute`): set by its ``AccountRouter`` when it reads the map. Then every transaction
    /// that writes deliveries notes their accounts due in `delivery_work`, on the coordinator
    /// too (the sweeper's expiries, rewards, transfers), not only on the accounts' nodes.
    static let keepsDueByBucket = NIOLockedValueBox(false)

    /// Whether a transaction wrote a delivery (``deliveriesWritten``), and whether it notes the
    /// accounts of what it writes as due in `delivery_work` (on an account's node, once due
    /// deliveries are kept by bucket: ``AccountRouter/deliveriesOnNodes``).
    final class DeliveriesWritten: Sendable {
        let notesDue: Bool
        private let written = NIOLockedValueBox(false)
        init(notesDue: Bool = false) { self.notesDue = notesDue }
        var isSet: Bool { written.withLockedValue { $0 } }
        func set() { written.withLockedValue { $0 = true } }
    }

    /// Wakes the delivery loops of every `serve` through `pool`, the coordinator on Citus, where
    /// they listen: for writes committed on an account's worker node, whose `NOTIFY` fires there
    /// (docs/CITUS.md, "How the pipeline runs on Citus").
    public static func wakeDeliveryLoops(pool: ConnectionPool) async throws {
        try await pool.notify(channel: deliveriesChannel)
    }

    /// What wrote an event; recorded on it.
    public enum Origin: String, Sendable {
        case worker, sweeper, reconcile, admin, store, transfer
        /// Device usage and holds (usage events).
        case usage
        /// A rewarded ad's callback (its credit event and usage events).
        case reward
    }

    /// Writes `events` and their deliveries, and wakes the delivery workers when there are any.
    /// `encodedStates` holds states encoded already, by account: an event whose state is the one
    /// there embeds that encoding.
    static func write(
        _ events: [Event], origin: Origin,
        encodedStates: [String: (state: AccountState, json: EncodedJSON)] = [:],
        on connection: Connection
    ) async throws {
        guard !events.isEmpty else { return }
        let ids = events.map(\.id)
        let payloads = try events.map { event in
            guard let encoded = encodedStates[event.accountID], encoded.state == event.state else { return try JSONText.of(event) }
            return try JSONText.of(EventPayload(event: event, state: encoded.json))
        }
        try await connection.preparedQuery(
            """
            INSERT INTO events (account_id, sequence, event_id, type, origin, occurred_at, payload)
            SELECT a, s, i::uuid, t, \(origin.rawValue), o, p::json FROM unnest(
                \(events.map(\.accountID))::text[],
                \(events.map(\.sequence))::bigint[],
                \(ids)::text[],
                \(events.map(\.type.rawValue))::text[],
                \(events.map(\.occurredAt))::timestamptz[],
                \(payloads)::text[]
            ) AS v(a, s, i, t, o, p)
            """
        )
        // One delivery per event and subscribed, enabled endpoint, due when the event occurred on
        // the writer's clock (not the database's), so delivery and resolution share one time.
        let deliveries = try await connection.preparedQuery(
            """
            INSERT INTO deliveries (account_id, endpoint_id, event_sequence, event_id, next_attempt_at)
            SELECT v.a, w.endpoint_id, v.s, v.i::uuid, v.o
            FROM unnest(
                \(events.map(\.accountID))::text[], \(events.map(\.sequence))::bigint[], \(ids)::text[], \(events.map(\.type.rawValue))::text[],
                \(events.map(\.occurredAt))::timestamptz[]
            ) AS v(a, s, i, t, o)
            JOIN webhook_endpoints AS w ON w.enabled AND (w.event_types IS NULL OR v.t = ANY(w.event_types))
            ORDER BY v.a, v.s
            """
        )
        if deliveries.affectedRows > 0, deliveriesWritten?.notesDue == true || keepsDueByBucket.withLockedValue({ $0 }) {
            // Each account due from its first new delivery's time, in its bucket, in this
            // transaction (sql/0048).
            var due: [String: Date] = [:]
            for event in events { due[event.accountID] = min(due[event.accountID] ?? event.occurredAt, event.occurredAt) }
            let accounts = due.keys.sorted()
            try await DeliveryStore.markDue(accounts, at: accounts.compactMap { due[$0] }, on: connection)
        }
        if deliveries.affectedRows > 0 {
            try await connection.notify(channel: deliveriesChannel)
            deliveriesWritten?.set()
        }
    }

    /// An event encoded with its state encoded before.
    private struct EventPayload: JSONWritable {
        var event: Event
        var state: EncodedJSON

        func encode(to encoder: any Encoder) throws {
            try event.encode(to: encoder, state: state)
        }

        func write(to writer: inout JSONWriter) throws {
            try event.write(to: &writer) { w in w.raw(state.bytes) }
        }
    }
}
