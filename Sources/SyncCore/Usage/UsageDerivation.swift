import Foundation

/// The ledger entries that follow from an account's transactions, written by whoever resolves the
/// account (in the same transaction as its state): the allowance of each meter at `now`
/// (``UsageAllowances``), and for each consumable that grants units, one `credit` (at its
/// purchase) and, once it is revoked (refunded), one `credit_revoked` of the same units (at the
/// revocation), whether or not they were spent. Ids come from the transaction, so resolving again
/// writes nothing new.
///
/// Only *verified* consumables grant (a StoreKit-signed report, or the App Store's notification):
/// with `SUBSYNC_REQUIRE_SIGNED=false` an unsigned report may unlock a tier for testing, but it
/// never mints minutes.
public enum UsageDerivation {
    public static func entries(
        transactions: some Sequence<TransactionAggregate>, state: AccountState, catalogue: Catalogue, now: Date
    ) -> [UsageEntry] {
        var entries = UsageAllowances.entries(for: state, catalogue: catalogue, now: now)
        for transaction in transactions {
            guard let product = catalogue.products[transaction.productID], product.kind == .consumable,
                !product.grants.isEmpty, transaction.representative.isVerified
            else { continue }
            for (meter, units) in product.grants.sorted(by: { $0.key < $1.key }) {
                entries.append(
                    UsageEntry(id: "credit:\(transaction.transactionID)", meter: meter, kind: .credit, units: units, at: transaction.purchasedAt))
                if let revokedAt = transaction.latestRevokedAt, transaction.isRevoked {
                    entries.append(
                        UsageEntry(id: "credit_revoked:\(transaction.transactionID)", meter: meter, kind: .creditRevoked, units: units, at: revokedAt))
                }
            }
        }
        return entries
    }

    /// What a consumable's refund history needs beyond ``entries(transactions:state:catalogue:now:)``,
    /// given the refund entries the account has (`stored`: per meter, the ids of its
    /// `credit_revoked` and `credit_restored` entries).
    ///
    /// A refund can be reversed (the App Store's REFUND_REVERSED, or an operator's `unrevoke`),
    /// and the purchase refunded again. Entries are never changed or deleted, so each turn adds
    /// one: while the transaction is revoked the account must hold one more `credit_revoked` of it
    /// than `credit_restored`, otherwise as many. The first refund is `credit_revoked:<tx>` (from
    /// `entries`); a reversal adds `credit_restored:<tx>#<reinstatement, µs since 1970>`, a later
    /// refund `credit_revoked:<tx>#<revocation, µs>`. The transaction's aggregate keeps only its
    /// latest revocation and reinstatement, so a refund and its reversal that arrive together
    /// add nothing: what the ledger records is what was seen resolved, and the units always net
    /// to the transaction's current state.
    public static func refundCorrections(
        transactions: some Sequence<TransactionAggregate>, catalogue: Catalogue, stored: [String: Set<String>]
    ) -> [UsageEntry] {
        var entries: [UsageEntry] = []
        let countsByMeter = stored.mapValues(refundCounts)
        for transaction in transactions {
            guard let product = catalogue.products[transaction.productID], product.kind == .consumable,
                !product.grants.isEmpty, transaction.representative.isVerified
            else { continue }
            let id = transaction.transactionID
            let first = "credit_revoked:\(id)"
            for (meter, units) in product.grants.sorted(by: { $0.key < $1.key }) {
                var ids = stored[meter] ?? []
                let counts = countsByMeter[meter]?[id]
                var revoked = counts?.revoked ?? 0
                let restored = counts?.restored ?? 0
                // `entries` writes the first refund's entry.
                if transaction.isRevoked && !ids.contains(first) { revoked += 1 }
                // More refunds than reversals recorded than the purchase's state allows: reversals
                // are missing; fewer: a refund is. One in the course of things; more only when
                // entries were lost (reconcile's repair), each then at the next free microsecond.
                var excess = revoked - restored - (transaction.isRevoked ? 1 : 0)
                while excess != 0 {
                    // A reversal needs a refund to reverse: without a revocation in the
                    // aggregate (its report pruned), nothing is given back.
                    let (kind, prefix, time) = excess > 0
                        ? (UsageEntry.Kind.creditRestored, "credit_restored:\(id)#",
                           transaction.latestRevokedAt == nil ? nil : transaction.latestReinstatedAt)
                        : (UsageEntry.Kind.creditRevoked, first + "#", transaction.latestRevokedAt)
                    guard let time else { break }
                    var stamp = microseconds(time)
                    while ids.contains(prefix + String(stamp)) { stamp += 1 }
                    ids.insert(prefix + String(stamp))
                    entries.append(UsageEntry(id: prefix + String(stamp), meter: meter, kind: kind, units: units, at: time))
                    excess += excess > 0 ? -1 : 1
                }
            }
        }
        return entries
    }

    /// Per transaction, how many refund (`credit_revoked:<tx>`, `credit_revoked:<tx>#...`) and
    /// reversal (`credit_restored:<tx>#...`) entries `ids` holds; one pass over them.
    private static func refundCounts(_ ids: Set<String>) -> [String: (revoked: Int, restored: Int)] {
        var counts: [String: (revoked: Int, restored: Int)] = [:]
        for id in ids {
            if id.hasPrefix("credit_revoked:") {
                counts[transactionID(ofCreditEntry: id), default: (0, 0)].revoked += 1
            } else if id.hasPrefix("credit_restored:") {
                counts[transactionID(ofCreditEntry: id), default: (0, 0)].restored += 1
            }
        }
        return counts
    }

    /// The transaction a consumable's credit entry is about: its id without the kind and without
    /// a refund turn's `#<µs>` (Apple's transaction ids are digits).
    public static func transactionID(ofCreditEntry entryID: String) -> String {
        var rest = Substring(entryID)
        if let colon = rest.firstIndex(of: ":") { rest = rest[rest.index(after: colon)...] }
        if let hash = rest.lastIndex(of: "#"), rest[rest.index(after: hash)...].allSatisfy(\.isASCIIDigit), hash < rest.index(before: rest.endIndex) {
            rest = rest[..<hash]
        }
        return String(rest)
    }

    private static func microseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
