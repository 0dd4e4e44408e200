import Foundation

/// The catalogue file as written (JSON, snake_case). ``Catalogue/init(document:)`` validates it
/// and derives the inherited features and limits; see `catalogue/default.json` for an example.
///
/// ```json
/// { "currency": "USD",
///   "tiers": [ { "id": "free", "name": "Free", "ads": true,
///                "features": ["basic_calling"], "limits": { "monthly_minutes": 100 } }, ... ],
///   "entitlements": [ { "id": "premium", "name": "Premium", "tier": "premium" }, ... ],
///   "products": [ { "id": "voip.premium.monthly", "entitlement": "premium",
///                   "kind": "auto_renewable", "duration": "P1M", "price": "9.99" }, ... ] }
/// ```
///
/// Tiers are listed lowest first; the first is the base tier everyone has without a purchase.
public struct CatalogueDocument: Sendable, Equatable, Codable {
    /// ISO 4217 currency of the prices (informational).
    public var currency: String?
    public var tiers: [TierDefinition]
    public var entitlements: [EntitlementDefinition]
    public var products: [ProductDefinition]

    public init(
        currency: String? = nil, tiers: [TierDefinition], entitlements: [EntitlementDefinition],
        products: [ProductDefinition]
    ) {
        self.currency = currency
        self.tiers = tiers
        self.entitlements = entitlements
        self.products = products
    }

    /// One tier as written: only its *own* features and the limits it changes.
    public struct TierDefinition: Sendable, Equatable, Codable {
        public var id: String
        public var name: String?
        /// Whether ads are shown at this tier.
        public var ads: Bool
        /// Features added at this tier (lower tiers' features are inherited).
        public var features: [String]
        /// Limits set at this tier; absent keys inherit from the tier below; `null` = unlimited.
        public var limits: [String: LimitValue]

        public init(
            id: String, name: String? = nil, ads: Bool, features: [String] = [], limits: [String: LimitValue] = [:]
        ) {
            self.id = id
            self.name = name
            self.ads = ads
            self.features = features
            self.limits = limits
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            id = try c.decode(String.self, forKey: .id)
            name = try c.decodeIfPresent(String.self, forKey: .name)
            ads = try c.decode(Bool.self, forKey: .ads)
            features = try c.decodeIfPresent([String].self, forKey: .features) ?? []
            limits = try c.decodeIfPresent([String: LimitValue].self, forKey: .limits) ?? [:]
        }

        enum CodingKeys: String, CodingKey {
            case id, name, ads, features, limits
        }
    }

    /// One entitlement: a name for "what was bought", mapped to the tier it unlocks.
    public struct EntitlementDefinition: Sendable, Equatable, Codable {
        public var id: String
        public var name: String?
        /// The tier this entitlement unlocks while active.
        public var tier: String

        public init(id: String, name: String? = nil, tier: String) {
            self.id = id
            self.name = name
            self.tier = tier
        }
    }

    /// One store product. `kind` and `duration` stay text here so that a bad value is reported
    /// by ``Catalogue`` with the product it belongs to.
    public struct ProductDefinition: Sendable, Equatable, Codable {
        public var id: String
        /// The entitlement granted; absent for consumables.
        public var entitlement: String?
        /// `auto_renewable`, `non_renewing`, `non_consumable` or `consumable`.
        public var kind: String
        /// ISO-8601 duration (`P1M`, `P3M`, `P1Y`, `P30D`); required for `non_renewing`.
        public var duration: String?
        /// Price in ``CatalogueDocument/currency``; written as a string ("4.99") or a number.
        public var price: Decimal?

        public init(id: String, entitlement: String?, kind: String, duration: String? = nil, price: Decimal? = nil) {
            self.id = id
            self.entitlement = entitlement
            self.kind = kind
            self.duration = duration
            self.price = price
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            id = try c.decode(String.self, forKey: .id)
            entitlement = try c.decodeIfPresent(String.self, forKey: .entitlement)
            kind = try c.decode(String.self, forKey: .kind)
            duration = try c.decodeIfPresent(String.self, forKey: .duration)
            if try !c.contains(.price) || c.decodeNil(forKey: .price) {
                price = nil
            } else if let text = try? c.decode(String.self, forKey: .price) {
                guard let value = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) else {
                    throw DecodingError.dataCorruptedError(
                        forKey: .price, in: c, debugDescription: "price '\(text)' is not a decimal number")
                }
                price = value
            } else {
                // A JSON number: go through its shortest decimal spelling so 4.99 stays 4.99.
                let number = try c.decode(Double.self, forKey: .price)
                price = Decimal(string: String(number), locale: Locale(identifier: "en_US_POSIX"))
            }
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id)
            try c.encodeIfPresent(entitlement, forKey: .entitlement)
            try c.encode(kind, forKey: .kind)
            try c.encodeIfPresent(duration, forKey: .duration)
            try c.encodeIfPresent(price.map { "\($0)" }, forKey: .price)
        }

        enum CodingKeys: String, CodingKey {
            case id, entitlement, kind, duration, price
        }
    }
}
