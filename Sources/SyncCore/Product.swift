import Foundation

/// A validated store product.
public struct Product: Sendable, Equatable, Identifiable {
    public let id: String
    public let kind: ProductKind
    /// The entitlement granted; `nil` only for consumables.
    public let entitlementID: String?
    /// Present for non-renewing products (required) and optionally for auto-renewables (used
    /// only when a report lacks `expires_at`).
    public let duration: ISODuration?
    public let price: Decimal?
    /// Units of meters a consumable grants once per purchase, by meter id (empty otherwise).
    public let grants: [String: Int]
    /// Index of the entitlement in ``Catalogue/entitlements`` (hot-path lookup, no hashing).
    let entitlementIndex: Int?
}
