import Foundation

extension Catalogue {
    /// Validates `document` and derives inherited features and limits. Throws the first problem,
    /// naming its entry. Rules:
    ///
    /// - At least one tier; tier, entitlement, product and feature ids are unique and well formed.
    /// - Tiers go upwards: a tier may not re-declare a feature it already inherits, may not lower
    ///   a limit (unlimited is highest), may not show ads when a lower tier does not, and may only
    ///   set limits the base tier declares (so every tier has a value for every limit).
    /// - Limits are `null` (unlimited) or non-negative integers.
    /// - Entitlements map to an existing tier other than the base tier.
    /// - Products: known kind; an existing entitlement, except consumables, which must have none;
    ///   `non_renewing` needs a positive ISO-8601 `duration`; `auto_renewable` may have one;
    ///   `non_consumable` and `consumable` may not; prices are not negative.
    /// - Meters: unique ids; a positive `period` (default `P1M`); allowances name existing tiers,
    ///   are `null` (unlimited) or 0...``UsageUnits/maximum``, and never go down from a tier to the
    ///   one above (the base tier defaults to 0); `low_fraction` in (0, 1); `rewards_per_day` and
    ///   `overage_price` not negative. Only consumables `grants` units, of existing meters,
    ///   1...``UsageUnits/maximum`` each.
    public init(document: CatalogueDocument) throws(CatalogueError) {
        guard !document.tiers.isEmpty else {
            throw CatalogueError(entry: "tiers", problem: "at least one tier (the base tier) is required")
        }

        var tiers: [Tier] = []
        var tierRankByID: [String: Int] = [:]
        var lowestTierRankByFeature: [String: Int] = [:]
        var inheritedFeatures: [String] = []
        var inheritedLimits: [String: LimitValue] = [:]
        var lowerTierWithoutAds: String?

        for (rank, definition) in document.tiers.enumerated() {
            let entry = "tiers[\(rank)] '\(definition.id)'"
            try Self.checkID(definition.id, entry: entry)
            if let other = tierRankByID[definition.id] {
                throw CatalogueError(entry: entry, problem: "duplicate tier id (also tiers[\(other)])")
            }
            if definition.ads, let lowerTierWithoutAds {
                throw CatalogueError(
                    entry: entry, problem: "shows ads but lower tier '\(lowerTierWithoutAds)' does not")
            }
            if !definition.ads && lowerTierWithoutAds == nil { lowerTierWithoutAds = definition.id }

            for feature in definition.features {
                try Self.checkID(feature, entry: "\(entry) feature '\(feature)'")
                if let lowerRank = lowestTierRankByFeature[feature] {
                    let problem =
                        lowerRank == rank
                        ? "lists feature '\(feature)' twice"
                        : "feature '\(feature)' is already inherited from lower tier '\(document.tiers[lowerRank].id)'"
                    throw CatalogueError(entry: entry, problem: problem)
                }
                lowestTierRankByFeature[feature] = rank
                inheritedFeatures.append(feature)
            }

            for (name, value) in definition.limits.sorted(by: { $0.key < $1.key }) {
                try Self.checkID(name, entry: "\(entry) limit '\(name)'")
                if case .limited(let amount) = value, amount < 0 {
                    throw CatalogueError(
                        entry: entry, problem: "limit '\(name)' is negative (use null for unlimited)")
                }
                if rank > 0 {
                    guard let lower = inheritedLimits[name] else {
                        throw CatalogueError(
                            entry: entry,
                            problem: "limit '\(name)' is not declared by the base tier '\(document.tiers[0].id)'")
                    }
                    if value < lower {
                        throw CatalogueError(
                            entry: entry,
                            problem: "limit '\(name)' (\(value)) is lower than the \(lower) of the tier below")
                    }
                }
                inheritedLimits[name] = value
            }

            tierRankByID[definition.id] = rank
            tiers.append(
                Tier(
                    id: definition.id, name: definition.name ?? definition.id, rank: rank, ads: definition.ads,
                    features: inheritedFeatures.sorted(), limits: inheritedLimits))
        }

        var entitlements: [Entitlement] = []
        var entitlementIndexByID: [String: Int] = [:]
        for (index, definition) in document.entitlements.enumerated() {
            let entry = "entitlements[\(index)] '\(definition.id)'"
            try Self.checkID(definition.id, entry: entry)
            if let other = entitlementIndexByID[definition.id] {
                throw CatalogueError(entry: entry, problem: "duplicate entitlement id (also entitlements[\(other)])")
            }
            guard let tierRank = tierRankByID[definition.tier] else {
                throw CatalogueError(entry: entry, problem: "unknown tier '\(definition.tier)'")
            }
            guard tierRank > 0 else {
                throw CatalogueError(
                    entry: entry,
                    problem: "maps to the base tier '\(definition.tier)', which every account has without a purchase")
            }
            entitlementIndexByID[definition.id] = index
            entitlements.append(
                Entitlement(
                    id: definition.id, name: definition.name ?? definition.id, tierID: definition.tier,
                    tierRank: tierRank))
        }

        var products: [String: Product] = [:]
        var productIndexByID: [String: Int] = [:]
        for (index, definition) in document.products.enumerated() {
            let entry = "products[\(index)] '\(definition.id)'"
            try Self.checkID(definition.id, entry: entry)
            if let other = productIndexByID[definition.id] {
                throw CatalogueError(entry: entry, problem: "duplicate product id (also products[\(other)])")
            }
            guard let kind = ProductKind(rawValue: definition.kind) else {
                let known = ProductKind.allCases.map(\.rawValue).joined(separator: ", ")
                throw CatalogueError(entry: entry, problem: "unknown kind '\(definition.kind)' (expected one of \(known))")
            }
            var entitlementIndex: Int?
            switch (kind, definition.entitlement) {
            case (.consumable, nil):
                break
            case (.consumable, .some(let name)):
                throw CatalogueError(
                    entry: entry, problem: "a consumable cannot grant an entitlement (remove entitlement '\(name)')")
            case (_, nil):
                throw CatalogueError(entry: entry, problem: "\(kind.rawValue) product needs an entitlement")
            case (_, .some(let name)):
                guard let found = entitlementIndexByID[name] else {
                    throw CatalogueError(entry: entry, problem: "unknown entitlement '\(name)'")
                }
                entitlementIndex = found
            }
            var duration: ISODuration?
            if let text = definition.duration {
                guard let parsed = ISODuration(text) else {
                    throw CatalogueError(
                        entry: entry, problem: "bad duration '\(text)' (expected ISO-8601 like P1M, P3M, P1Y, P30D)")
                }
                duration = parsed
            }
            switch (kind, duration) {
            case (.nonRenewing, nil):
                throw CatalogueError(entry: entry, problem: "non_renewing product needs a duration")
            case (.nonConsumable, .some), (.consumable, .some):
                throw CatalogueError(entry: entry, problem: "\(kind.rawValue) product cannot have a duration")
            default:
                break
            }
            if let price = definition.price, price < 0 {
                throw CatalogueError(entry: entry, problem: "price \(price) is negative")
            }
            productIndexByID[definition.id] = index
            products[definition.id] = Product(
                id: definition.id, kind: kind, entitlementID: definition.entitlement, duration: duration,
                price: definition.price, grants: definition.grants ?? [:], entitlementIndex: entitlementIndex)
        }

        let meters = try Self.meters(document, tierRankByID: tierRankByID)
        for (index, definition) in document.products.enumerated() {
            guard let grants = definition.grants, !grants.isEmpty else { continue }
            let entry = "products[\(index)] '\(definition.id)'"
            guard definition.kind == ProductKind.consumable.rawValue else {
                throw CatalogueError(entry: entry, problem: "only consumables grant units (grants of a \(definition.kind) product)")
            }
            for (meter, units) in grants.sorted(by: { $0.key < $1.key }) {
                guard meters.contains(where: { $0.id == meter }) else {
                    throw CatalogueError(entry: entry, problem: "grants units of unknown meter '\(meter)'")
                }
                guard (1...UsageUnits.maximum).contains(units) else {
                    throw CatalogueError(entry: entry, problem: "grants \(units) units of '\(meter)' (expected 1...\(UsageUnits.maximum))")
                }
            }
        }

        self.init(
            document: document, tiers: tiers, entitlements: entitlements, products: products, meters: meters,
            tierRankByID: tierRankByID, lowestTierRankByFeature: lowestTierRankByFeature)
    }

    private static func meters(_ document: CatalogueDocument, tierRankByID: [String: Int]) throws(CatalogueError) -> [Meter] {
        var meters: [Meter] = []
        for (index, definition) in (document.meters ?? []).enumerated() {
            let entry = "meters[\(index)] '\(definition.id)'"
            try checkID(definition.id, entry: entry)
            if let other = meters.firstIndex(where: { $0.id == definition.id }) {
                throw CatalogueError(entry: entry, problem: "duplicate meter id (also meters[\(other)])")
            }
            let periodText = definition.period ?? "P1M"
            guard let period = ISODuration(periodText) else {
                throw CatalogueError(entry: entry, problem: "bad period '\(periodText)' (expected ISO-8601 like P1M, P1W, P1Y)")
            }
            for (tier, value) in definition.allowances.sorted(by: { $0.key < $1.key }) {
                guard tierRankByID[tier] != nil else {
                    throw CatalogueError(entry: entry, problem: "allowance for unknown tier '\(tier)'")
                }
                if case .limited(let units) = value, !(0...UsageUnits.maximum).contains(units) {
                    throw CatalogueError(entry: entry, problem: "allowance of '\(tier)' is \(units) (expected null or 0...\(UsageUnits.maximum))")
                }
            }
            var allowances: [LimitValue] = []
            for (rank, tier) in document.tiers.enumerated() {
                let inherited = allowances.last ?? .limited(0)
                let value = definition.allowances[tier.id] ?? inherited
                if rank > 0, value < inherited {
                    throw CatalogueError(
                        entry: entry, problem: "allowance of '\(tier.id)' (\(value)) is lower than the \(inherited) of the tier below")
                }
                allowances.append(value)
            }
            if let fraction = definition.lowFraction, !(fraction > 0 && fraction < 1) {
                throw CatalogueError(entry: entry, problem: "low_fraction \(fraction) is not between 0 and 1")
            }
            if let perDay = definition.rewardsPerDay, !(0...UsageUnits.maximum).contains(perDay) {
                throw CatalogueError(entry: entry, problem: "rewards_per_day \(perDay) is out of range (0...\(UsageUnits.maximum))")
            }
            if let price = definition.overagePrice, price < 0 {
                throw CatalogueError(entry: entry, problem: "overage_price \(price) is negative")
            }
            meters.append(
                Meter(
                    id: definition.id, name: definition.name ?? definition.id, unit: definition.unit ?? "unit", period: period,
                    allowanceByTierRank: allowances, overagePrice: definition.overagePrice, lowFraction: definition.lowFraction,
                    rewardsPerDay: definition.rewardsPerDay))
        }
        return meters
    }

    /// Catalogue ids follow the report id rules (1–128 of `[A-Za-z0-9._:-]`) so that every
    /// product id in the catalogue can also appear in a valid report.
    private static func checkID(_ id: String, entry: String) throws(CatalogueError) {
        switch Report.idProblem(id) {
        case nil: return
        case .empty?: throw CatalogueError(entry: entry, problem: "id must not be empty")
        case .tooLong(let maximum)?: throw CatalogueError(entry: entry, problem: "id is longer than \(maximum)")
        default: throw CatalogueError(entry: entry, problem: "id may only contain letters, digits and . _ : -")
        }
    }
}
