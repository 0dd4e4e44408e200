import Foundation
import Postgres
import SyncCore

// What `JSONDecoder` decodes from the stored JSON of these types, read directly (members in any
// order, unknown ones ignored, `null` or absent for optionals). JSONColumn falls back to
// `JSONDecoder` for any text a reader refuses.

extension AccountState: JSONReadable {
    public init(json reader: inout JSONReader) throws {
        var tier: String?
        var features: [String]?
        var limits: [String: LimitValue]?
        var ads: Bool?
        var entitlements: [EntitlementState]?
        var nextTransitionAt: Date?
        try reader.object { r, key in
            if key == "tier" {
                tier = try r.string()
            } else if key == "features" {
                var list: [String] = []
                try r.array { list.append(try $0.string()) }
                features = list
            } else if key == "limits" {
                var map: [String: LimitValue] = [:]
                try r.object { r, name in map[name.string] = r.null() ? .unlimited : .limited(try r.int()) }
                limits = map
            } else if key == "ads" {
                ads = try r.bool()
            } else if key == "entitlements" {
                entitlements = try [EntitlementState](json: &r)
            } else if key == "next_transition_at" {
                nextTransitionAt = r.null() ? nil : try r.date()
            } else {
                try r.skip()
            }
        }
        guard let tier, let features, let limits, let ads, let entitlements else {
            throw reader.error("an account state without all of its members")
        }
        self.init(tier: tier, features: features, limits: limits, ads: ads, entitlements: entitlements, nextTransitionAt: nextTransitionAt)
    }
}

extension EntitlementState: JSONReadable {
    public init(json reader: inout JSONReader) throws {
        var id: String?, tier: String?, status: EntitlementStatus?, productID: String?, productKind: ProductKind?
        var sourceTransactionID: String?, originalTransactionID: String?, purchasedAt: Date?, willRenew: Bool?
        var expiresAt: Date?, periodEndsAt: Date?, gracePeriodExpiresAt: Date?, revokedAt: Date?
        var revocationReason: RevocationReason?, expirationReason: ExpirationReason?, renewalProductID: String?
        var priceIncreaseStatus: PriceIncreaseStatus?, renewalDate: Date?
        try reader.object { r, key in
            if key == "id" {
                id = try r.string()
            } else if key == "tier" {
                tier = try r.string()
            } else if key == "status" {
                status = EntitlementStatus(rawValue: try r.string())
                if status == nil { throw r.error("unknown status") }
            } else if key == "product_id" {
                productID = try r.string()
            } else if key == "product_kind" {
                productKind = ProductKind(rawValue: try r.string())
                if productKind == nil { throw r.error("unknown product kind") }
            } else if key == "source_transaction_id" {
                sourceTransactionID = try r.string()
            } else if key == "original_transaction_id" {
                originalTransactionID = try r.string()
            } else if key == "purchased_at" {
                purchasedAt = try r.date()
            } else if key == "will_renew" {
                willRenew = try r.bool()
            } else if key == "expires_at" {
                expiresAt = r.null() ? nil : try r.date()
            } else if key == "period_ends_at" {
                periodEndsAt = r.null() ? nil : try r.date()
            } else if key == "grace_period_expires_at" {
                gracePeriodExpiresAt = r.null() ? nil : try r.date()
            } else if key == "revoked_at" {
                revokedAt = r.null() ? nil : try r.date()
            } else if key == "revocation_reason" {
                revocationReason = r.null() ? nil : try RevocationReason(json: &r)
            } else if key == "expiration_reason" {
                expirationReason = r.null() ? nil : try ExpirationReason(json: &r)
            } else if key == "renewal_product_id" {
                renewalProductID = r.null() ? nil : try r.string()
            } else if key == "price_increase_status" {
                priceIncreaseStatus = r.null() ? nil : try PriceIncreaseStatus(json: &r)
            } else if key == "renewal_date" {
                renewalDate = r.null() ? nil : try r.date()
            } else {
                try r.skip()  // is_active: derived from status
            }
        }
        guard let id, let tier, let status, let productID, let productKind, let sourceTransactionID,
            let originalTransactionID, let purchasedAt, let willRenew
        else { throw reader.error("an entitlement state without all of its members") }
        self.init(
            id: id, tier: tier, status: status, productID: productID, productKind: productKind,
            sourceTransactionID: sourceTransactionID, originalTransactionID: originalTransactionID, purchasedAt: purchasedAt,
            expiresAt: expiresAt, periodEndsAt: periodEndsAt, gracePeriodExpiresAt: gracePeriodExpiresAt, willRenew: willRenew,
            revokedAt: revokedAt, revocationReason: revocationReason, expirationReason: expirationReason,
            renewalProductID: renewalProductID, priceIncreaseStatus: priceIncreaseStatus, renewalDate: renewalDate)
    }
}

// The string enums below read as their `Decodable` conformances read a name: in any case.
// StoreKit's integer codes (revocation reason, expiration intent, price increase status) are
// left to `JSONDecoder`: the service stores the names.

extension RevocationReason: JSONReadable {
    public init(json reader: inout JSONReader) throws { self = try reader.caseInsensitiveName("revocation reason") }
}

extension StoreEnvironment: JSONReadable {
    public init(json reader: inout JSONReader) throws { self = try reader.caseInsensitiveName("environment") }
}

extension ExpirationReason: JSONReadable {
    public init(json reader: inout JSONReader) throws { self = try reader.caseInsensitiveName("expiration reason") }
}

extension PriceIncreaseStatus: JSONReadable {
    public init(json reader: inout JSONReader) throws { self = try reader.caseInsensitiveName("price increase status") }
}

extension JSONReader {
    /// The string enum case named by the next string in any case; `what` names the enum in the
    /// error.
    mutating func caseInsensitiveName<T: RawRepresentable>(_ what: String) throws -> T where T.RawValue == String {
        guard let value = T(rawValue: try string().lowercased()) else { throw error("unknown \(what)") }
        return value
    }
}
