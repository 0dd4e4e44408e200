/// The default catalogue of a VoIP app, embedded so the service runs without a file
/// (docs/RESOLUTION.md, "Catalogue"): `catalogue/default.json`
/// (`Sources/SyncCore/Resources/catalogue`), compiled into the binary as a package resource.
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
    public static let defaultJSON = String(decoding: PackageResources.default_json, as: UTF8.self)

    /// The embedded default catalogue.
    public static let `default`: Catalogue = {
        do {
            return try Catalogue(json: defaultJSON)
        } catch {
            // Not input-fed: the embedded file is fixed at build time and checked by the tests.
            fatalError("the embedded default catalogue is invalid: \(error)")
        }
    }()
}
