/// The default catalogue of a VoIP app, embedded so the service runs without a file
/// (docs/RESOLUTION.md, "Catalogue"). The same JSON ships as `catalogue/default.json`; a test
/// checks the two decode to the same catalogue.
///
/// Tiers (lowest first): free (ads, basic calling, 100 minutes) < basic (unlimited domestic, call
/// recording, 1000 minutes) < premium (international, video, group calls, custom ringtones,
/// unlimited minutes) < business (everything, priority support, analytics, API access).
/// Products: monthly and yearly subscriptions for basic, premium and business (4.99, 9.99, 29.99
/// a month), 3- and 6-month non-renewing passes for basic and premium, a premium lifetime
/// purchase, and call credits (a consumable granting 100 minutes). One meter, `minutes`: 100 a month
/// on free, 1000 on basic, unlimited from premium up; overage at 0.02 a minute; rewarded ads up
/// to 30 minutes a day.
extension Catalogue {
    /// The embedded default catalogue's JSON text.
    public static let defaultJSON = #"""
{
  "currency": "USD",
  "tiers": [
    {
      "id": "free",
      "name": "Free",
      "ads": true,
      "features": ["basic_calling"],
      "limits": { "monthly_minutes": 100, "max_devices": 1, "group_call_participants": 0 }
    },
    {
      "id": "basic",
      "name": "Basic",
      "ads": false,
      "features": ["unlimited_domestic", "call_recording"],
      "limits": { "monthly_minutes": 1000, "max_devices": 2 }
    },
    {
      "id": "premium",
      "name": "Premium",
      "ads": false,
      "features": ["international_calling", "video_calling", "group_calls", "custom_ringtones"],
      "limits": { "monthly_minutes": null, "max_devices": 5, "group_call_participants": 8 }
    },
    {
      "id": "business",
      "name": "Business",
      "ads": false,
      "features": ["priority_support", "analytics", "api_access"],
      "limits": { "max_devices": 25, "group_call_participants": 50 }
    }
  ],
  "entitlements": [
    { "id": "basic", "name": "Basic", "tier": "basic" },
    { "id": "premium", "name": "Premium", "tier": "premium" },
    { "id": "business", "name": "Business", "tier": "business" }
  ],
  "products": [
    { "id": "voip.basic.monthly", "entitlement": "basic", "kind": "auto_renewable", "duration": "P1M", "price": "4.99" },
    { "id": "voip.basic.yearly", "entitlement": "basic", "kind": "auto_renewable", "duration": "P1Y", "price": "49.99" },
    { "id": "voip.premium.monthly", "entitlement": "premium", "kind": "auto_renewable", "duration": "P1M", "price": "9.99" },
    { "id": "voip.premium.yearly", "entitlement": "premium", "kind": "auto_renewable", "duration": "P1Y", "price": "99.99" },
    { "id": "voip.business.monthly", "entitlement": "business", "kind": "auto_renewable", "duration": "P1M", "price": "29.99" },
    { "id": "voip.business.yearly", "entitlement": "business", "kind": "auto_renewable", "duration": "P1Y", "price": "299.99" },
    { "id": "voip.basic.pass.3m", "entitlement": "basic", "kind": "non_renewing", "duration": "P3M", "price": "13.99" },
    { "id": "voip.basic.pass.6m", "entitlement": "basic", "kind": "non_renewing", "duration": "P6M", "price": "26.99" },
    { "id": "voip.premium.pass.3m", "entitlement": "premium", "kind": "non_renewing", "duration": "P3M", "price": "27.99" },
    { "id": "voip.premium.pass.6m", "entitlement": "premium", "kind": "non_renewing", "duration": "P6M", "price": "53.99" },
    { "id": "voip.premium.lifetime", "entitlement": "premium", "kind": "non_consumable", "price": "199.99" },
    { "id": "voip.credits.100", "kind": "consumable", "price": "1.99", "grants": { "minutes": 100 } }
  ],
  "meters": [
    {
      "id": "minutes",
      "name": "Call minutes",
      "unit": "minute",
      "period": "P1M",
      "allowances": { "free": 100, "basic": 1000, "premium": null },
      "overage_price": "0.02",
      "low_fraction": 0.1,
      "rewards_per_day": 30
    }
  ]
}
"""#

    /// The embedded default catalogue.
    public static let `default`: Catalogue = {
        do {
            return try Catalogue(json: defaultJSON)
        } catch {
            // Not input-fed: the embedded text is fixed at build time and checked by the tests.
            fatalError("the embedded default catalogue is invalid: \(error)")
        }
    }()
}
