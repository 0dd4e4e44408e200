import Foundation
import Hummingbird
import SyncCore

/// `GET /v1/catalogue`: the tiers (features, limits, ads) and meters the service resolves with.
/// Client libraries cache it beside the account state, so that when a cached subscription
/// expires offline they know what the tier below it allows (docs/CLIENT.md). Nothing in it is
/// secret, but it answers only authenticated callers: the admin key or any account token.
struct CatalogueController: Sendable {
    let catalogue: Catalogue
    let authenticator: Authenticator

    func addRoutes(to router: Router<some RequestContext>) {
        let body = CatalogueResponse(catalogue)
        router.get("v1/catalogue") { request, _ in
            _ = try await authenticator.authenticate(request)
            return try JSONResponse.make(body)
        }
    }
}

/// The JSON of `GET /v1/catalogue`.
struct CatalogueResponse: Encodable {
    struct TierView: Encodable {
        var id: String
        var name: String
        var rank: Int
        var ads: Bool
        var features: [String]
        var limits: [String: LimitValue]
    }

    struct EntitlementView: Encodable {
        var id: String
        var tier: String
    }

    struct MeterView: Encodable {
        var id: String
        var name: String
        var unit: String
    }

    var currency: String?
    var tiers: [TierView]
    var entitlements: [EntitlementView]
    var meters: [MeterView]

    init(_ catalogue: Catalogue) {
        currency = catalogue.document.currency
        tiers = catalogue.tiers.map { TierView(id: $0.id, name: $0.name, rank: $0.rank, ads: $0.ads, features: $0.features, limits: $0.limits) }
        entitlements = catalogue.entitlements.map { EntitlementView(id: $0.id, tier: $0.tierID) }
        meters = catalogue.meters.map { MeterView(id: $0.id, name: $0.name, unit: $0.unit) }
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(currency, forKey: .currency)
        try c.encode(tiers, forKey: .tiers)
        try c.encode(entitlements, forKey: .entitlements)
        try c.encode(meters, forKey: .meters)
    }

    enum CodingKeys: String, CodingKey { case currency, tiers, entitlements, meters }
}
