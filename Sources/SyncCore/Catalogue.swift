import Foundation

/// The validated product catalogue: tiers (lowest first, features and limits inherited upwards),
/// entitlements (each unlocking one tier) and products (each granting one entitlement, except
/// consumables). Build it with ``init(jsonData:)``, ``init(document:)`` or use ``default``.
///
/// Immutable and `Sendable`: load it once at start and share it.
public struct Catalogue: Sendable, Equatable {
    /// The document this catalogue was built from (re-encodable to JSON).
    public let document: CatalogueDocument
    /// Tiers, lowest first; `tiers[0]` is the base tier everyone has.
    public let tiers: [Tier]
    /// Entitlements in catalogue order.
    public let entitlements: [Entitlement]
    /// Products by id.
    public let products: [String: Product]
    /// Meters in catalogue order (empty when nothing is metered).
    public let meters: [Meter]
    /// Tier rank by tier id.
    let tierRankByID: [String: Int]
    /// The lowest tier including each feature (after inheritance), by feature.
    let lowestTierRankByFeature: [String: Int]
    /// Indices into ``entitlements`` in entitlement-id order (the order of resolved states).
    let entitlementIndicesByID: [Int]

    /// The base tier: what an account with no active entitlement gets.
    public var baseTier: Tier { tiers[0] }

    /// Decodes and validates a catalogue file.
    public init(jsonData: Data) throws(CatalogueError) {
        let document: CatalogueDocument
        do {
            document = try JSONDecoder().decode(CatalogueDocument.self, from: jsonData)
        } catch let error as DecodingError {
            throw CatalogueError(entry: error.catalogueEntry, problem: error.catalogueProblem)
        } catch {
            throw CatalogueError(entry: "catalogue", problem: "not valid JSON: \(error)")
        }
        try self.init(document: document)
    }

    /// Decodes and validates a catalogue from JSON text.
    public init(json: String) throws(CatalogueError) {
        try self.init(jsonData: Data(json.utf8))
    }

    /// The tier with `id`, if it exists.
    public func tier(id: String) -> Tier? {
        tierRankByID[id].map { tiers[$0] }
    }

    /// The entitlement with `id`, if it exists.
    public func entitlement(id: String) -> Entitlement? {
        entitlements.first { $0.id == id }
    }

    /// The meter with `id`, if it exists.
    public func meter(id: String) -> Meter? {
        meters.first { $0.id == id }
    }

    /// Every feature of any tier, sorted.
    public var allFeatures: [String] {
        lowestTierRankByFeature.keys.sorted()
    }

    init(
        document: CatalogueDocument, tiers: [Tier], entitlements: [Entitlement], products: [String: Product],
        meters: [Meter], tierRankByID: [String: Int], lowestTierRankByFeature: [String: Int]
    ) {
        self.meters = meters
        self.document = document
        self.tiers = tiers
        self.entitlements = entitlements
        self.products = products
        self.tierRankByID = tierRankByID
        self.lowestTierRankByFeature = lowestTierRankByFeature
        self.entitlementIndicesByID = entitlements.indices.sorted { entitlements[$0].id < entitlements[$1].id }
    }
}

extension DecodingError {
    /// The JSON path of a decoding error, e.g. `products[3].kind`.
    fileprivate var catalogueEntry: String {
        let path: [any CodingKey]
        switch self {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            path = context.codingPath
        case .keyNotFound(let key, let context):
            path = context.codingPath + [key]
        @unknown default:
            path = []
        }
        var text = ""
        for key in path {
            if let index = key.intValue {
                text += "[\(index)]"
            } else {
                text += text.isEmpty ? key.stringValue : ".\(key.stringValue)"
            }
        }
        return text.isEmpty ? "catalogue" : text
    }

    fileprivate var catalogueProblem: String {
        switch self {
        case .typeMismatch(let type, let context): "expected \(type): \(context.debugDescription)"
        case .valueNotFound(let type, _): "missing value of type \(type)"
        case .keyNotFound(let key, _): "missing required field '\(key.stringValue)'"
        case .dataCorrupted(let context): context.debugDescription
        @unknown default: "\(self)"
        }
    }
}
