import Foundation

// The resolver's per-entitlement working state: internal, value types, allocation-light.

/// A grant with its computed ends, as seconds since the reference date (`+inf` = never ends).
struct Grant {
    var index: Int
    var kind: ProductKind
    var periodEnd: Double
    var accessEnd: Double
}

/// A non-renewing purchase waiting to be stacked.
struct PendingPass {
    var index: Int
    var duration: ISODuration?
}

/// What the resolver accumulates for one entitlement while scanning the transactions.
struct EntitlementSlot {
    /// The grant with the greatest (access end, purchased_at, transaction id).
    var best: Grant?
    /// The transaction with the greatest (purchased_at, transaction id), granting or not.
    var latestIndex: Int?
    /// Non-renewing grants, stacked once all are known.
    var passes: [PendingPass] = []

    mutating func noteTransaction(_ index: Int, in transactions: [TransactionAggregate]) {
        guard let latestIndex else {
            self.latestIndex = index
            return
        }
        if Self.purchasedBefore(transactions[latestIndex], transactions[index]) {
            self.latestIndex = index
        }
    }

    mutating func offer(_ grant: Grant, in transactions: [TransactionAggregate]) {
        guard let best else {
            self.best = grant
            return
        }
        if grant.accessEnd != best.accessEnd {
            if grant.accessEnd > best.accessEnd { self.best = grant }
        } else if Self.purchasedBefore(transactions[best.index], transactions[grant.index]) {
            self.best = grant
        }
    }

    /// Stacks the non-renewing passes: in purchase order, each starts when the previous one ends
    /// (or at its purchase, if later) and lasts its catalogue duration.
    mutating func stackPasses(in transactions: [TransactionAggregate]) {
        passes.sort { Self.purchasedBefore(transactions[$0.index], transactions[$1.index]) }
        var end = -Double.infinity
        for pass in passes {
            let purchased = transactions[pass.index].purchasedAt
            let start = max(end, purchased.timeIntervalSinceReferenceDate)
            // The catalogue guarantees a duration for non-renewing products.
            let startDate = Date(timeIntervalSinceReferenceDate: start)
            end = (pass.duration?.advance(startDate) ?? startDate).timeIntervalSinceReferenceDate
            offer(Grant(index: pass.index, kind: .nonRenewing, periodEnd: end, accessEnd: end), in: transactions)
        }
    }

    /// The (purchased_at, transaction id) order.
    static func purchasedBefore(_ a: TransactionAggregate, _ b: TransactionAggregate) -> Bool {
        if a.purchasedAt != b.purchasedAt { return a.purchasedAt < b.purchasedAt }
        return a.transactionID < b.transactionID
    }
}
