import Foundation
import Hummingbird
import HummingbirdTesting
import SyncCore
import SyncService
import TestSupport
import Testing

/// `GET /v1/catalogue`, which client libraries cache for offline answers (docs/CLIENT.md).
@Suite("Catalogue API")
struct CatalogueAPITests {
    @Test("any account token or the admin key reads the tiers, entitlements and meters; no credential is 401")
    func readsTheCatalogue() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application().test(.router) { client in
                let token = try await env.token(for: "zoe")
                let (status, json) = try await client.getJSON("/v1/catalogue", credential: token)
                #expect(status == .ok)
                let tiers = try #require(json["tiers"] as? [[String: Any]])
                #expect(tiers.map { $0["id"] as? String } == Catalogue.default.tiers.map(\.id))
                #expect(tiers.map { $0["rank"] as? Int } == [0, 1, 2, 3])
                #expect((tiers[2]["features"] as? [String])?.contains("video_calling") == true)
                #expect((tiers[2]["limits"] as? [String: Any])?["monthly_minutes"] is NSNull, "unlimited is null")
                #expect((tiers[0]["limits"] as? [String: Any])?["monthly_minutes"] as? Int == 100)
                #expect((json["entitlements"] as? [[String: Any]])?.first?["tier"] as? String == "basic")
                #expect((json["meters"] as? [[String: Any]])?.first?["id"] as? String == "minutes")
                let (admin, _) = try await client.getJSON("/v1/catalogue")
                #expect(admin == .ok)
                let (anonymous, refusal) = try await client.getJSON("/v1/catalogue", credential: nil)
                #expect(anonymous == .unauthorized)
                #expect(refusal.errorCode == "unauthenticated")
            }
        }
    }
}
