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
    /// What is counted (call minutes, say): allowances per tier, overage price, thresholds
    /// (see `docs/usage.md`). Absent: nothing is metered.
    public var meters: [MeterDefinition]?

    public init(
        currency: String? = nil, tiers: [TierDefinition], entitlements: [EntitlementDefinition],
        products: [ProductDefinition], meters: [MeterDefinition]? = nil
    ) {
        self.currency = currency
        self.tiers = tiers
        self.entitlements = entitlements
        self.products = products
        self.meters = meters
    }

    /// One meter as written.
    ///
    /// ```json
    /// { "id": "minutes", "name": "Call minutes", "unit": "minute", "period": "P1M",
    ///   "allowances": { "free": 100, "basic": 1000, "premium": null },
    ///   "overage_price": "0.02", "low_fraction": 0.1, "rewards_per_day": 30 }
    /// ```
    public struct MeterDefinition: Sendable, Equatable, Codable {
        public var id: String
        public var name: String?
        /// The unit counted, for people (`minute`).
        public var unit: String?
        /// The allowance period (ISO-8601, default `P1M`).
        public var period: String?
        /// Units included per period, by tier id; absent tiers inherit from the tier below (the
        /// base tier defaults to 0); `null` is unlimited.
        public var allowances: [String: LimitValue]
        /// Price of one unit of overage in the catalogue's currency (absent: overage is counted, not priced).
        public var overagePrice: Decimal?
        /// `usage.low` fires when what may still be spent falls to this fraction of the allowance.
        public var lowFraction: Double?
        /// The most units rewarded ads may grant an account in a UTC day (absent: no rewards).
        public var rewardsPerDay: Int?

        public init(
            id: String, name: String? = nil, unit: String? = nil, period: String? = nil, allowances: [String: LimitValue] = [:],
            overagePrice: Decimal? = nil, lowFraction: Double? = nil, rewardsPerDay: Int? = nil
        ) {
            self.id = id
            self.name = name
            self.unit = unit
            self.period = period
            self.allowances = allowances
            self.overagePrice = overagePrice
            self.lowFraction = lowFraction
            self.rewardsPerDay = rewardsPerDay
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            id = try c.decode(String.self, forKey: .id)
            name = try c.decodeIfPresent(String.self, forKey: .name)
            unit = try c.decodeIfPresent(String.self, forKey: .unit)
            period = try c.decodeIfPresent(String.self, forKey: .period)
            allowances = try c.decodeIfPresent([String: LimitValue].self, forKey: .allowances) ?? [:]
            overagePrice = try DecimalText.decode(c, forKey: .overagePrice)
            lowFraction = try c.decodeIfPresent(Double.self, forKey: .lowFraction)
            rewardsPerDay = try c.decodeIfPresent(Int.self, forKey: .rewardsPerDay)
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id)
            try c.encodeIfPresent(name, forKey: .name)
            try c.encodeIfPresent(unit, forKey: .unit)
            try c.encodeIfPresent(period, forKey: .period)
            try c.encode(allowances, forKey: .allowances)
            try c.encodeIfPresent(overagePrice.map { "\($0)" }, forKey: .overagePrice)
            try c.encodeIfPresent(lowFraction, forKey: .lowFraction)
            try c.encodeIfPresent(rewardsPerDay, forKey: .rewardsPerDay)
        }

        enum CodingKeys: String, CodingKey {
            case id, name, unit, period, allowances
            case overagePrice = "overage_price"
            case lowFraction = "low_fraction"
            case rewardsPerDay = "rewards_per_day"
        }
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
        /// Units of meters a consumable grants once per purchase (`{"minutes": 100}`).
        public var grants: [String: Int]?

        public init(
            id: String, entitlement: String?, kind: String, duration: String? = nil, price: Decimal? = nil, grants: [String: Int]? = nil
        ) {
            self.id = id
            self.entitlement = entitlement
            self.kind = kind
            self.duration = duration
            self.price = price
            self.grants = grants
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            id = try c.decode(String.self, forKey: .id)
            entitlement = try c.decodeIfPresent(String.self, forKey: .entitlement)
            kind = try c.decode(String.self, forKey: .kind)
            duration = try c.decodeIfPresent(String.self, forKey: .duration)
            price = try DecimalText.decode(c, forKey: .price)
            grants = try c.decodeIfPresent([String: Int].self, forKey: .grants)
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id)
            try c.encodeIfPresent(entitlement, forKey: .entitlement)
            try c.encode(kind, forKey: .kind)
            try c.encodeIfPresent(duration, forKey: .duration)
            try c.encodeIfPresent(price.map { "\($0)" }, forKey: .price)
            try c.encodeIfPresent(grants, forKey: .grants)
        }

        enum CodingKeys: String, CodingKey {
            case id, entitlement, kind, duration, price, grants
        }
    }
}

/// Prices in the catalogue: a string ("4.99") or a JSON number, read exactly.
///
/// A string must be a plain decimal number as a whole (digits, one optional point, an optional
/// sign and exponent): Foundation's `Decimal(string:)` reads the longest prefix it can, so "4,99"
/// would be 4 and "1_000" 1, silently. Parsed without a locale: with one, the first price loads
/// ICU's locale data, milliseconds of every start (docs/PERFORMANCE.md, *In the code*).
enum DecimalText {
    static func decode<Key: CodingKey>(_ c: KeyedDecodingContainer<Key>, forKey key: Key) throws -> Decimal? {
        if try !c.contains(key) || c.decodeNil(forKey: key) { return nil }
        if let text = try? c.decode(String.self, forKey: key) {
            guard let value = decimal(text) else {
                throw DecodingError.dataCorruptedError(
                    forKey: key, in: c, debugDescription: "'\(text)' is not a decimal number (write it as 4.99: digits, a point, no spaces)")
            }
            return value
        }
        // A JSON number: go through its shortest decimal spelling so 4.99 stays 4.99.
        let number = try c.decode(Double.self, forKey: key)
        return decimal(String(number))
    }

    /// `text` as a decimal if it is one as a whole: `[+-]?(digits[.digits*]|.digits)([eE][+-]?digits)?`.
    static func decimal(_ text: String) -> Decimal? {
        var bytes = text.utf8[...]
        func digits() -> Int {
            let count = bytes.prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }.count
            bytes = bytes.dropFirst(count)
            return count
        }
        func sign() {
            if bytes.first == UInt8(ascii: "+") || bytes.first == UInt8(ascii: "-") { bytes = bytes.dropFirst() }
        }
        sign()
        var mantissa = digits()
        if bytes.first == UInt8(ascii: ".") {
            bytes = bytes.dropFirst()
            mantissa += digits()
        }
        guard mantissa > 0 else { return nil }
        if bytes.first == UInt8(ascii: "e") || bytes.first == UInt8(ascii: "E") {
            bytes = bytes.dropFirst()
            sign()
            guard digits() > 0 else { return nil }
        }
        guard bytes.isEmpty else { return nil }
        return Decimal(string: text, locale: nil)
    }
}
