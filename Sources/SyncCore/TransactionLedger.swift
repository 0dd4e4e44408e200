/// The per-transaction aggregates of one account, built by joining reports or aggregates one at
/// a time. Order, duplicates and batching do not matter: two ledgers fed the same set of reports
/// in any way hold equal aggregates.
public struct TransactionLedger: Sendable, Equatable {
    private var storage: [TransactionAggregate] = []
    private var indexByTransactionID: [String: Int] = [:]

    public init() {}

    /// A ledger holding `aggregates` (joined per transaction id).
    public init(_ aggregates: some Sequence<TransactionAggregate>) {
        for aggregate in aggregates { add(aggregate) }
    }

    /// Joins one report into its transaction's aggregate.
    public mutating func add(_ report: Report) {
        if let index = indexByTransactionID[report.transactionID] {
            storage[index].join(report)
        } else {
            indexByTransactionID[report.transactionID] = storage.count
            storage.append(TransactionAggregate(report))
        }
    }

    /// Joins an aggregate (e.g. one loaded from the store) into its transaction's aggregate.
    public mutating func add(_ aggregate: TransactionAggregate) {
        if let index = indexByTransactionID[aggregate.transactionID] {
            storage[index].join(aggregate)
        } else {
            indexByTransactionID[aggregate.transactionID] = storage.count
            storage.append(aggregate)
        }
    }

    /// Joins every aggregate of `other` into this ledger.
    public mutating func merge(_ other: TransactionLedger) {
        for aggregate in other.storage { add(aggregate) }
    }

    /// The aggregate of `transactionID`, if any report of it was added.
    public subscript(transactionID: String) -> TransactionAggregate? {
        indexByTransactionID[transactionID].map { storage[$0] }
    }

    /// Number of distinct transactions.
    public var count: Int { storage.count }

    /// The aggregates sorted by transaction id (a canonical order, independent of arrival order).
    public var aggregates: [TransactionAggregate] {
        storage.sorted { $0.transactionID < $1.transactionID }
    }

    /// The aggregates in insertion order (cheaper; the resolver does not depend on order).
    public var unorderedAggregates: [TransactionAggregate] { storage }

    public static func == (lhs: TransactionLedger, rhs: TransactionLedger) -> Bool {
        lhs.aggregates == rhs.aggregates
    }
}
