import Foundation

/// An account's story in time order, as the operator console shows it: each report (device,
/// source, verified or not, what it said), the resolutions that joined them, each event with its
/// sequence, each webhook delivery with its attempts, and each operator action (``OperatorLog``).
///
/// Built from what ``AccountInspector``, ``DeliveryStore`` and ``OperatorLog`` already read; it
/// adds no query.
public struct AccountTimeline: Sendable, Codable {
    /// What an entry is.
    public enum Kind: String, Sendable, Codable, Comparable {
        case report, resolution, event, delivery
        /// An operator's action (``OperatorLog``).
        case action

        /// At one instant a report comes before the resolution that joins it, which comes before
        /// its events, which come before their deliveries; an operator's action comes last.
        var rank: Int {
            switch self {
            case .report: 0
            case .resolution: 1
            case .event: 2
            case .delivery: 3
            case .action: 4
            }
        }

        public static func < (lhs: Kind, rhs: Kind) -> Bool { lhs.rank < rhs.rank }
    }

    /// Reports joined in one resolution (the same transaction, so the same `resolved_at`).
    public struct Resolution: Sendable, Codable, Equatable {
        public var reportIDs: [String]
        public var transactionIDs: [String]
        /// `admin` when an operator's revoke or unrevoke was joined, else `worker`.
        public var by: String

        enum CodingKeys: String, CodingKey {
            case reportIDs = "report_ids"
            case transactionIDs = "transaction_ids"
            case by
        }
    }

    /// One entry: `at`, `kind` and the one field named by the kind.
    public struct Entry: Sendable, Codable {
        public var at: Date
        public var kind: Kind
        public var report: AccountInspector.ReportLine?
        public var resolution: Resolution?
        public var event: EventLog.Line?
        public var delivery: DeliveryStore.AccountDelivery?
        public var action: OperatorLog.Action?
    }

    public var entries: [Entry]

    /// Interleaves `details`' reports and events with `deliveries` and `actions`, oldest first.
    public init(
        details: AccountInspector.Details, deliveries: [DeliveryStore.AccountDelivery], actions: [OperatorLog.Action] = []
    ) {
        let reports = details.transactions.flatMap(\.reports) + details.unresolvedReports
        var entries = reports.map { Entry(at: $0.receivedAt, kind: .report, report: $0) }
        let resolved = Dictionary(grouping: reports.filter { $0.resolvedAt != nil }, by: { $0.resolvedAt ?? .distantPast })
        for (at, joined) in resolved {
            let sorted = joined.sorted { $0.reportID < $1.reportID }
            let resolution = Resolution(
                reportIDs: sorted.map(\.reportID), transactionIDs: Array(Set(sorted.map(\.transactionID))).sorted(),
                by: sorted.contains { $0.source == "admin" } ? "admin" : "worker")
            entries.append(Entry(at: at, kind: .resolution, resolution: resolution))
        }
        entries += details.events.map { Entry(at: $0.occurredAt, kind: .event, event: $0) }
        // A delivery is written in its event's transaction, whose database time (`created_at`)
        // precedes the service's clock reading the event carries; shown after its event.
        let eventTimes = Dictionary(details.events.map { ($0.sequence, $0.occurredAt) }, uniquingKeysWith: { first, _ in first })
        entries += deliveries.map { delivery in
            let at = max(delivery.delivery.createdAt, eventTimes[delivery.delivery.eventSequence] ?? .distantPast)
            return Entry(at: at, kind: .delivery, delivery: delivery)
        }
        entries += actions.map { Entry(at: $0.at, kind: .action, action: $0) }
        self.entries = entries.sorted { a, b in
            if a.at != b.at { return a.at < b.at }
            if a.kind != b.kind { return a.kind < b.kind }
            return a.sortKey < b.sortKey
        }
    }
}

extension AccountTimeline.Entry {
    /// Orders entries of one kind at one instant: by event sequence, delivery id or report id.
    fileprivate var sortKey: String {
        if let event { return String(format: "%020lld", event.sequence) }
        if let delivery { return String(format: "%020lld", delivery.delivery.deliveryID) }
        if let action { return String(format: "%020lld", action.id) }
        return report?.reportID ?? ""
    }
}
