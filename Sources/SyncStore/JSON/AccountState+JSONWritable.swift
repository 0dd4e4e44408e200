import Postgres
import SyncCore

// The conformances live here rather than in SyncCore, which stays free of the database's
// modules (both are this package's, so they are not retroactive).

extension AccountState: JSONWritable {
    /// The bytes of `encode(to:)` (keys sorted), written directly.
    public func write(to writer: inout JSONWriter) throws {
        try writer.object { w in
            w.key("ads")
            w.bool(ads)
            w.key("entitlements")
            try w.array(entitlements) { w, entitlement in try entitlement.write(to: &w) }
            w.key("features")
            w.array(features) { w, feature in w.string(feature) }
            w.key("limits")
            w.limits(limits)
            w.key("next_transition_at")
            w.date(nextTransitionAt)
            w.key("tier")
            w.string(tier)
        }
    }
}

extension EntitlementState: JSONWritable {
    /// The bytes of `encode(to:)` (keys sorted, absent values as `null`), written directly.
    public func write(to writer: inout JSONWriter) throws {
        writer.object { w in
            w.key("expiration_reason")
            w.string(expirationReason?.rawValue)
            w.key("expires_at")
            w.date(expiresAt)
            w.key("grace_period_expires_at")
            w.date(gracePeriodExpiresAt)
            w.key("id")
            w.string(id)
            w.key("is_active")
            w.bool(isActive)
            w.key("original_transaction_id")
            w.string(originalTransactionID)
            w.key("period_ends_at")
            w.date(periodEndsAt)
            w.key("price_increase_status")
            w.string(priceIncreaseStatus?.rawValue)
            w.key("product_id")
            w.string(productID)
            w.key("product_kind")
            w.string(productKind.rawValue)
            w.key("purchased_at")
            w.date(purchasedAt)
            w.key("renewal_date")
            w.date(renewalDate)
            w.key("renewal_product_id")
            w.string(renewalProductID)
            w.key("revocation_reason")
            w.string(revocationReason?.rawValue)
            w.key("revoked_at")
            w.date(revokedAt)
            w.key("source_transaction_id")
            w.string(sourceTransactionID)
            w.key("status")
            w.string(status.rawValue)
            w.key("tier")
            w.string(tier)
            w.key("will_renew")
            w.bool(willRenew)
        }
    }
}

extension JSONWriter {
    /// A state's `limits`: names sorted, `null` for unlimited (as `encode(to:)` writes them).
    /// Also the account's answer in the API.
    public mutating func limits(_ limits: [String: LimitValue]) {
        object { w in
            for (name, limit) in limits.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
                w.key(escaping: name)
                switch limit {
                case .limited(let value): w.int(value)
                case .unlimited: w.null()
                }
            }
        }
    }
}
