import Foundation

/// The ledger entries that follow from an account's transactions, written by whoever resolves the
/// account (in the same transaction as its state): for each consumable that grants units, one
/// `credit` (at its purchase). Allowances are not entries any more: ``UsageTimeline`` derives
/// them from the transactions whenever a balance is computed. Refunds, their reversals and moves between accounts depend on what the account
/// has stored: ``creditCorrections(transactions:catalogue:stored:arrived:now:)``. Ids come from
/// the transaction, so resolving again writes nothing new.
///
/// Only *verified* consumables grant (a StoreKit-signed report, or the App Store's notification):
/// with `SUBSYNC_REQUIRE_SIGNED=false` an unsigned report may unlock a tier for testing, but it
/// never mints minutes.
public enum UsageDerivation {
    public static func entries(transactions: some Sequence<TransactionAggregate>, catalogue: Catalogue) -> [UsageEntry] {
        var entries: [UsageEntry] = []
        for transaction in transactions {
            guard let product = catalogue.products[transaction.productID], product.kind == .consumable,
                !product.grants.isEmpty, transaction.representative.isVerified
            else { continue }
            for (meter, units) in product.grants.sorted(by: { $0.key < $1.key }) {
                entries.append(
                    UsageEntry(id: "credit:\(transaction.transactionID)", meter: meter, kind: .credit, units: units, at: transaction.purchasedAt))
            }
        }
        return entries
    }

    /// What a consumable's history needs beyond ``entries(transactions:catalogue:)``,
    /// given the credit entries the account has (`stored`: per meter, the ids of its `credit`,
    /// `credit_revoked` and `credit_restored` entries), for the purchases the account holds.
    ///
    /// A refund can be reversed (the App Store's REFUND_REVERSED, or an operator's `unrevoke`),
    /// and the purchase refunded again; a purchase can move to another account and back (binding
    /// policy `transfer`: the old account is debited `credit_transferred:<tx>`). Entries are never
    /// changed or deleted, so each turn adds one, and the units of a purchase's entries must net
    /// to what it gives now: its grant while it stands, nothing while it is refunded.
    /// - The first refund is `credit_revoked:<tx>`; a reversal adds
    ///   `credit_restored:<tx>#<reinstatement, µs since 1970>`, a later refund
    ///   `credit_revoked:<tx>#<revocation, µs>`.
    /// - A purchase that comes back to an account that already had it (and was debited when it
    ///   left) is credited again: `credit:<tx>#<now, µs>`.
    /// The aggregate keeps only the latest revocation and reinstatement, so a refund and its
    /// reversal that arrive together add nothing: what the ledger records is what was seen
    /// resolved, and the units always net to the purchase's current state.
    ///
    /// `arrived`: the purchases that moved to this account in this resolution. What they need
    /// given back is a credit at `now`, never a reversal dated before they came (that reversal
    /// happened on the account they came from).
    public static func creditCorrections(
        transactions: some Sequence<TransactionAggregate>, catalogue: Catalogue, stored: [String: Set<String>],
        arrived: Set<String> = [], now: Date
    ) -> [UsageEntry] {
        var entries: [UsageEntry] = []
        let countsByMeter = stored.mapValues(creditCounts)
        for transaction in transactions {
            guard let product = catalogue.products[transaction.productID], product.kind == .consumable,
                !product.grants.isEmpty, transaction.representative.isVerified
            else { continue }
            // The aggregate's fields are copied out and the netting runs in a non-generic
            // function: Swift 6.3.1's optimizer (CopyPropagation) crashed on this loop when it
            // read the aggregate's optional revocation inside it (`swift build -c release`).
            let purchase = CreditedPurchase(
                id: transaction.transactionID, isRevoked: transaction.isRevoked, latestRevokedAt: transaction.latestRevokedAt,
                latestReinstatedAt: transaction.latestReinstatedAt, arrived: arrived.contains(transaction.transactionID))
            for (meter, units) in product.grants.sorted(by: { $0.key < $1.key }) {
                entries += corrections(
                    of: purchase, meter: meter, units: units, stored: stored[meter] ?? [],
                    counts: countsByMeter[meter]?[purchase.id] ?? CreditCounts(), now: now)
            }
        }
        return entries
    }

    /// What ``creditCorrections(transactions:catalogue:stored:arrived:now:)`` reads of a purchase.
    private struct CreditedPurchase {
        var id: String
        var isRevoked: Bool
        var latestRevokedAt: Date?
        var latestReinstatedAt: Date?
        /// It moved to this account in this resolution.
        var arrived: Bool
    }

    /// The entries that make `purchase`'s credit entries on one meter (`stored`, counted in
    /// `counts`) net to what it gives now.
    private static func corrections(
        of purchase: CreditedPurchase, meter: String, units: Int, stored: Set<String>, counts storedCounts: CreditCounts, now: Date
    ) -> [UsageEntry] {
        var entries: [UsageEntry] = []
        var ids = stored
        var counts = storedCounts
        let id = purchase.id
        let firstCredit = "credit:\(id)"
        let firstRefund = "credit_revoked:\(id)"
        // What `entries` writes: the purchase's credit.
        if !ids.contains(firstCredit) { counts.credited += 1 }
        // A refund already reversed when first seen: its refund and its reversal are both facts
        // the aggregate holds, so both are written, at their own times, as they are when they
        // arrive one after the other (the credits between them are the same whatever the order
        // and grouping of the reports; docs/USAGE.md).
        if storedCounts.refunded == 0, storedCounts.transferred == 0, !purchase.arrived, !purchase.isRevoked,
            let revokedAt = purchase.latestRevokedAt, let reinstatedAt = purchase.latestReinstatedAt, reinstatedAt > revokedAt
        {
            var stamp = reinstatedAt.microsecondsSince1970
            while ids.contains("credit_restored:\(id)#\(stamp)") { stamp += 1 }
            for (kind, entryID, at) in [
                (UsageEntry.Kind.creditRevoked, firstRefund, revokedAt), (.creditRestored, "credit_restored:\(id)#\(stamp)", reinstatedAt),
            ] where !ids.contains(entryID) {
                ids.insert(entryID)
                entries.append(UsageEntry(id: entryID, meter: meter, kind: kind, units: units, at: at))
                if kind == .creditRevoked { counts.refunded += 1 } else { counts.restored += 1 }
            }
        }
        // Packs the entries give, against the one (or none, refunded) the purchase gives.
        let gives = purchase.isRevoked ? 0 : 1
        while gives != counts.net {
            let correction: (kind: UsageEntry.Kind, prefix: String, at: Date)
            if gives < counts.net {
                // More than it gives: only a refund takes units back (one the aggregate has: the
                // first, a refund again, or one whose entry was lost). The first refund on this
                // account is `credit_revoked:<tx>`.
                guard let revokedAt = purchase.latestRevokedAt else { break }
                correction = (.creditRevoked, ids.contains(firstRefund) ? firstRefund + "#" : firstRefund, revokedAt)
            } else if purchase.arrived {
                // It came back to this account now: credited again now.
                correction = (.credit, firstCredit + "#", now)
            } else if counts.refunded > counts.restored {
                // A refund stands in the ledger: only its reversal gives units back, and only
                // with a refund in the aggregate to reverse (not one whose report was pruned).
                guard purchase.latestRevokedAt != nil, let reinstatedAt = purchase.latestReinstatedAt else { break }
                correction = (.creditRestored, "credit_restored:\(id)#", reinstatedAt)
            } else {
                // Debited when it left this account, and back.
                correction = (.credit, firstCredit + "#", now)
            }
            // An id that does not end in `#` is used as it is (the first refund).
            var entryID = correction.prefix
            if correction.prefix.hasSuffix("#") {
                var stamp = correction.at.microsecondsSince1970
                while ids.contains(correction.prefix + String(stamp)) { stamp += 1 }
                entryID = correction.prefix + String(stamp)
            }
            ids.insert(entryID)
            entries.append(UsageEntry(id: entryID, meter: meter, kind: correction.kind, units: units, at: correction.at))
            switch correction.kind {
            case .creditRevoked: counts.refunded += 1
            case .creditRestored: counts.restored += 1
            default: counts.credited += 1
            }
        }
        return entries
    }

    /// A purchase's credit entries, counted by kind (each is the pack's units).
    struct CreditCounts {
        var credited = 0
        var refunded = 0
        var restored = 0
        var transferred = 0

        /// Packs they give: credits and reversals, less refunds and transfers away.
        var net: Int { credited + restored - refunded - transferred }
    }

    /// Per transaction, its credit entries in `ids`, counted; one pass over them.
    private static func creditCounts(_ ids: Set<String>) -> [String: CreditCounts] {
        var counts: [String: CreditCounts] = [:]
        for id in ids {
            let transaction = transactionID(ofCreditEntry: id)
            if id.hasPrefix("credit:") {
                counts[transaction, default: CreditCounts()].credited += 1
            } else if id.hasPrefix("credit_revoked:") {
                counts[transaction, default: CreditCounts()].refunded += 1
            } else if id.hasPrefix("credit_restored:") {
                counts[transaction, default: CreditCounts()].restored += 1
            } else if id.hasPrefix(UsageEntry.transferPrefix) {
                counts[transaction, default: CreditCounts()].transferred += 1
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

}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
