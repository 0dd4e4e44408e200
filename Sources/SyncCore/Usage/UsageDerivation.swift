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
}
