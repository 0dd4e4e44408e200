import Foundation
import SyncCore
import TestSupport
import Testing

@Suite struct CatalogueTests {
    /// `catalogue/default.json` at the package root, found from this file's location.
    static let defaultFileURL = TestPackage.file("catalogue/default.json")

    @Test func shippedFileAndEmbeddedDefaultAreTheSameCatalogue() throws {
        let data = try Data(contentsOf: Self.defaultFileURL)
        let fromFile = try Catalogue(jsonData: data)
        #expect(fromFile == Catalogue.default)
        #expect(fromFile.document == Catalogue.default.document)
    }

    @Test func defaultCatalogueModelsTheVoIPTiers() throws {
        let catalogue = Catalogue.default
        #expect(catalogue.tiers.map(\.id) == ["free", "basic", "premium", "business"])
        #expect(catalogue.tiers.map(\.ads) == [true, false, false, false])
        // Features are inherited upwards: each tier has everything of the one below.
        for (lower, higher) in zip(catalogue.tiers, catalogue.tiers.dropFirst()) {
            #expect(Set(lower.features).isSubset(of: Set(higher.features)))
            for (name, value) in lower.limits {
                let higherValue = try #require(higher.limits[name])
                #expect(higherValue >= value, "\(higher.id).\(name)")
            }
        }
        #expect(catalogue.tier(id: "free")?.limits["monthly_minutes"] == .limited(100))
        #expect(catalogue.tier(id: "basic")?.limits["monthly_minutes"] == .limited(1000))
        #expect(catalogue.tier(id: "premium")?.limits["monthly_minutes"] == .unlimited)
        // Business does not restate monthly_minutes: it inherits premium's unlimited.
        #expect(catalogue.tier(id: "business")?.limits["monthly_minutes"] == .unlimited)
        #expect(catalogue.tier(id: "business")?.features.contains("video_calling") == true)
        #expect(catalogue.products["voip.basic.monthly"]?.price == Decimal(string: "4.99"))
        #expect(catalogue.products["voip.premium.monthly"]?.price == Decimal(string: "9.99"))
        #expect(catalogue.products["voip.business.monthly"]?.price == Decimal(string: "29.99"))
        #expect(catalogue.products["voip.premium.pass.6m"]?.duration == ISODuration("P6M"))
        #expect(catalogue.products["voip.premium.lifetime"]?.kind == .nonConsumable)
        #expect(catalogue.products["voip.credits.100"]?.entitlementID == nil)
        let kinds = Set(catalogue.products.values.map(\.kind))
        #expect(kinds == Set(ProductKind.allCases))
    }

    @Test func featureChecksNameTheLowestTierThatAllows() throws {
        let catalogue = Catalogue.default
        let free = resolve([], at: utc(2025, 1, 1))
        let basicPurchase = report(
            "a", transaction: "t1", product: ProductID.basicMonthly, purchased: utc(2025, 1, 1),
            expires: utc(2025, 2, 1), observed: utc(2025, 1, 1))
        let basic = resolve([basicPurchase], at: utc(2025, 1, 2))

        let video = try catalogue.check(feature: "video_calling", state: free)
        #expect(video == FeatureCheck(feature: "video_calling", allowed: false, requiredTier: "premium", currentTier: "free"))
        #expect(try catalogue.check(feature: "basic_calling", state: free).allowed)
        #expect(try catalogue.check(feature: "basic_calling", state: free).requiredTier == "free")
        #expect(try catalogue.check(feature: "call_recording", state: basic).allowed)
        #expect(try !catalogue.check(feature: "api_access", state: basic).allowed)
        #expect(try catalogue.check(feature: "api_access", state: basic).requiredTier == "business")
        #expect(throws: FeatureCheckError.unknownFeature("teleportation")) {
            try catalogue.check(feature: "teleportation", state: basic)
        }
        // Every feature's required tier is the first tier listing it.
        for feature in catalogue.allFeatures {
            let first = catalogue.tiers.first { $0.features.contains(feature) }
            #expect(try catalogue.check(feature: feature, state: free).requiredTier == first?.id)
        }
    }

    @Test func featureCheckEncodesSnakeCase() throws {
        let check = FeatureCheck(feature: "video_calling", allowed: false, requiredTier: "premium", currentTier: "free")
        let data = try WireJSON.encoder.encode(check)
        #expect(try WireJSON.keys(of: data) == ["feature", "allowed", "required_tier", "current_tier"])
    }

    // MARK: - Malformed catalogues

    /// The default document with one change applied.
    private func mutated(_ change: (inout CatalogueDocument) -> Void) -> CatalogueDocument {
        var document = Catalogue.default.document
        change(&document)
        return document
    }

    private func expectError(
        _ document: CatalogueDocument, entry: String, mentioning fragment: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        do {
            _ = try Catalogue(document: document)
            Issue.record("catalogue was accepted", sourceLocation: sourceLocation)
        } catch {
            #expect(error.entry == entry, sourceLocation: sourceLocation)
            #expect(error.description.contains(fragment), "\(error)", sourceLocation: sourceLocation)
        }
    }

    @Test func productErrorsNameTheProduct() {
        expectError(
            mutated { $0.products[0].entitlement = "gold" }, entry: "products[0] 'voip.basic.monthly'",
            mentioning: "unknown entitlement 'gold'")
        expectError(
            mutated { $0.products[1].duration = "P3X" }, entry: "products[1] 'voip.basic.yearly'",
            mentioning: "bad duration 'P3X'")
        expectError(
            mutated { $0.products[2].duration = "PT1H" }, entry: "products[2] 'voip.premium.monthly'",
            mentioning: "bad duration")
        expectError(
            mutated { $0.products[3].id = "voip.basic.monthly" }, entry: "products[3] 'voip.basic.monthly'",
            mentioning: "duplicate product id (also products[0])")
        expectError(
            mutated { $0.products[8].duration = nil }, entry: "products[8] 'voip.premium.pass.3m'",
            mentioning: "non_renewing product needs a duration")
        expectError(
            mutated { $0.products[10].duration = "P1Y" }, entry: "products[10] 'voip.premium.lifetime'",
            mentioning: "cannot have a duration")
        expectError(
            mutated { $0.products[11].entitlement = "premium" }, entry: "products[11] 'voip.credits.100'",
            mentioning: "consumable cannot grant")
        expectError(
            mutated { $0.products[0].kind = "subscription" }, entry: "products[0] 'voip.basic.monthly'",
            mentioning: "unknown kind 'subscription'")
        expectError(
            mutated { $0.products[0].entitlement = nil }, entry: "products[0] 'voip.basic.monthly'",
            mentioning: "needs an entitlement")
        expectError(
            mutated { $0.products[0].price = Decimal(-1) }, entry: "products[0] 'voip.basic.monthly'",
            mentioning: "negative")
        expectError(
            mutated { $0.products[0].id = "voip basic" }, entry: "products[0] 'voip basic'", mentioning: "id may only")
    }

    @Test func meterErrorsNameTheMeter() {
        let entry = "meters[0] 'minutes'"
        expectError(mutated { $0.meters?[0].allowances["basic"] = .limited(50) }, entry: entry,
                    mentioning: "allowance of 'basic' (50) is lower than the 100 of the tier below")
        expectError(mutated { $0.meters?[0].allowances["gold"] = .limited(5) }, entry: entry, mentioning: "unknown tier 'gold'")
        expectError(mutated { $0.meters?[0].allowances["free"] = .limited(-1) }, entry: entry, mentioning: "expected null or 0")
        expectError(mutated { $0.meters?[0].period = "PT1H" }, entry: entry, mentioning: "bad period 'PT1H'")
        expectError(mutated { $0.meters?[0].lowFraction = 1.5 }, entry: entry, mentioning: "low_fraction 1.5")
        expectError(mutated { $0.meters?[0].rewardsPerDay = -3 }, entry: entry, mentioning: "rewards_per_day -3")
        expectError(mutated { $0.meters?[0].overagePrice = Decimal(-1) }, entry: entry, mentioning: "overage_price -1 is negative")
        expectError(mutated { document in
            let first = document.meters?[0] ?? .init(id: "x")
            document.meters?.append(first)
        }, entry: "meters[1] 'minutes'",
                    mentioning: "duplicate meter id (also meters[0])")
        expectError(mutated { $0.products[11].grants = ["sms": 5] }, entry: "products[11] 'voip.credits.100'",
                    mentioning: "unknown meter 'sms'")
        expectError(mutated { $0.products[11].grants = ["minutes": 0] }, entry: "products[11] 'voip.credits.100'",
                    mentioning: "grants 0 units")
        expectError(mutated { $0.products[0].grants = ["minutes": 5] }, entry: "products[0] 'voip.basic.monthly'",
                    mentioning: "only consumables grant units")
    }

    @Test func theDefaultCatalogueMetersMinutes() throws {
        let minutes = try #require(Catalogue.default.meter(id: "minutes"))
        #expect(minutes.allowanceByTierRank == [.limited(100), .limited(1_000), .unlimited, .unlimited])
        #expect(minutes.overagePrice == Decimal(string: "0.02"))
        #expect(Catalogue.default.products[ProductID.credits]?.grants == ["minutes": 100])
        // Re-encoding keeps the meters (the document round-trips).
        let encoded = try JSONEncoder().encode(Catalogue.default.document)
        #expect(try Catalogue(jsonData: encoded) == Catalogue.default)
    }

    @Test func tierAndEntitlementErrorsNameTheEntry() {
        expectError(mutated { $0.tiers = [] }, entry: "tiers", mentioning: "at least one tier")
        expectError(
            mutated { $0.tiers[2].id = "basic" }, entry: "tiers[2] 'basic'", mentioning: "duplicate tier id")
        expectError(
            mutated { $0.tiers[2].limits["monthly_minutes"] = .limited(500) }, entry: "tiers[2] 'premium'",
            mentioning: "limit 'monthly_minutes' (500) is lower than the 1000 of the tier below")
        expectError(
            mutated { $0.tiers[3].limits["monthly_minutes"] = .limited(5000) }, entry: "tiers[3] 'business'",
            mentioning: "lower than the unlimited")
        expectError(
            mutated { $0.tiers[3].features.append("video_calling") }, entry: "tiers[3] 'business'",
            mentioning: "already inherited from lower tier 'premium'")
        expectError(
            mutated { $0.tiers[2].ads = true }, entry: "tiers[2] 'premium'",
            mentioning: "shows ads but lower tier 'basic' does not")
        expectError(
            mutated { $0.tiers[1].limits["storage_gb"] = .limited(5) }, entry: "tiers[1] 'basic'",
            mentioning: "not declared by the base tier 'free'")
        expectError(
            mutated { $0.tiers[0].limits["monthly_minutes"] = .limited(-1) }, entry: "tiers[0] 'free'",
            mentioning: "negative (use null for unlimited)")
        expectError(
            mutated { $0.entitlements[0].tier = "platinum" }, entry: "entitlements[0] 'basic'",
            mentioning: "unknown tier 'platinum'")
        expectError(
            mutated { $0.entitlements[0].tier = "free" }, entry: "entitlements[0] 'basic'",
            mentioning: "base tier 'free'")
        expectError(
            mutated { $0.entitlements[2].id = "basic" }, entry: "entitlements[2] 'basic'",
            mentioning: "duplicate entitlement id")
        // Reordering tiers so that a cheaper one sits above breaks the upward rules.
        expectError(
            mutated { $0.tiers.swapAt(1, 2) }, entry: "tiers[2] 'basic'", mentioning: "lower than")
    }

    @Test func malformedJSONNamesThePath() {
        let missingKind = #"{"tiers":[{"id":"free","ads":true}],"entitlements":[],"products":[{"id":"x"}]}"#
        #expect(throws: CatalogueError(entry: "products[0].kind", problem: "missing required field 'kind'")) {
            try Catalogue(json: missingKind)
        }
        let badAds = #"{"tiers":[{"id":"free","ads":"yes"}],"entitlements":[],"products":[]}"#
        do {
            _ = try Catalogue(json: badAds)
            Issue.record("accepted ads: \"yes\"")
        } catch {
            #expect(error.entry == "tiers[0].ads")
        }
        do {
            _ = try Catalogue(json: "{ not json")
            Issue.record("accepted garbage")
        } catch {
            #expect(!error.description.isEmpty)
        }
    }

    @Test func limitsUseNullForUnlimitedAndPricesAcceptNumbers() throws {
        let json = #"""
            {"tiers":[{"id":"free","ads":true,"features":["a"],"limits":{"minutes":10}},
                      {"id":"pro","ads":false,"features":["b"],"limits":{"minutes":null}}],
             "entitlements":[{"id":"pro","tier":"pro"}],
             "products":[{"id":"pro.monthly","entitlement":"pro","kind":"auto_renewable","price":4.99}]}
            """#
        let catalogue = try Catalogue(json: json)
        #expect(catalogue.tier(id: "pro")?.limits["minutes"] == .unlimited)
        #expect(catalogue.tier(id: "pro")?.features == ["a", "b"])
        #expect(catalogue.products["pro.monthly"]?.price == Decimal(string: "4.99"))
        // Re-encoding the document and loading it again gives the same catalogue.
        let reencoded = try JSONEncoder().encode(catalogue.document)
        #expect(try Catalogue(jsonData: reencoded) == catalogue)
        let text = String(decoding: reencoded, as: UTF8.self)
        #expect(text.contains(#""minutes":null"#))
    }

    /// A price string is a decimal number as a whole, or the catalogue is refused naming it:
    /// Foundation's parser alone read the longest prefix ("4,99" as 4).
    @Test func priceStringsAreWholeDecimals() throws {
        func load(_ price: String) throws -> Decimal? {
            let json = """
                {"tiers":[{"id":"free","ads":true,"features":[],"limits":{}},{"id":"pro","ads":false,"features":[],"limits":{}}],
                 "entitlements":[{"id":"pro","tier":"pro"}],
                 "products":[{"id":"pro.monthly","entitlement":"pro","kind":"auto_renewable","price":"\(price)"}]}
                """
            return try Catalogue(json: json).products["pro.monthly"]?.price
        }
        for (text, value) in [("4.99", "4.99"), ("0.02", "0.02"), ("5", "5"), ("5.", "5"), (".5", "0.5"), ("+2", "2"), ("1e3", "1000"), ("2.5E-1", "0.25")] {
            #expect(try load(text) == Decimal(string: value), "\(text)")
        }
        for text in ["4,99", "4.99x", " 4.99", "4.99 ", "1_000", "0x10", "", ".", "e3", "1e", "--1", "NaN", "\u{0664}.99"] {
            do {
                let value = try load(text)
                Issue.record("'\(text)' was read as \(String(describing: value))")
            } catch {
                #expect("\(error)".contains("is not a decimal number"), "'\(text)': \(error)")
            }
        }
    }
}
