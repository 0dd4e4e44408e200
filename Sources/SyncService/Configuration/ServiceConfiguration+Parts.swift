import Logging
import SyncCore

/// The optional parts the settings ask for, made (keys and certificates read) and said out loud
/// once at start: on, with what they check, or off.
extension ServiceConfiguration {
    /// The StoreKit verifier of these settings, and the signature policy said out loud.
    /// - Throws: ``ConfigurationError`` when a root certificate cannot be read.
    public func makeStoreKitVerifier(logger: Logger) throws(ConfigurationError) -> StoreKitVerifier? {
        var verifier: StoreKitVerifier?
        if let bundleID, !appleRootCertificatePaths.isEmpty {
            do {
                verifier = try StoreKitVerifier(
                    rootCertificatePaths: appleRootCertificatePaths, bundleID: bundleID,
                    allowedEnvironments: storeEnvironments, appAppleID: appAppleID)
            } catch {
                throw ConfigurationError(variable: "SUBSYNC_APPLE_ROOT_CERTIFICATES", message: "cannot be used: \(error)")
            }
            logger.notice("StoreKit verification on", metadata: [
                "bundle_id": "\(bundleID)",
                "environments": "\(storeEnvironments.map(\.rawValue).sorted().joined(separator: ","))",
                "roots": "\(appleRootCertificatePaths.count)",
            ])
        }
        if !requiresSignedReports {
            let why = requireSigned == false ? "SUBSYNC_REQUIRE_SIGNED=false" : "embedded development mode (no DATABASE_URL)"
            for line in [
                "**************************************************************************************",
                "SIGNATURES ARE NOT REQUIRED (\(why)): unsigned device reports are trusted as sent,",
                "so any device can grant itself any subscription. Never run production like this.",
                "**************************************************************************************",
            ] {
                logger.warning("\(line)")
            }
        }
        return verifier
    }

    /// The App Store Server API configuration (its key read and parsed now); the client is made
    /// once the pool is.
    /// - Throws: ``ConfigurationError`` when a setting or the key cannot be used.
    public func makeAppStoreAPIConfiguration(logger: Logger) throws(ConfigurationError) -> AppStoreAPIConfiguration? {
        guard let appStoreAPI else {
            logger.notice("App Store Server API off (no SUBSYNC_APPSTORE_KEY_FILE): the store is never asked (docs/STORE.md)")
            return nil
        }
        let configuration = try appStoreAPI.configuration(bundleID: bundleID)
        logger.notice("App Store Server API on", metadata: [
            "environment": "\(configuration.environment.rawValue)", "key_id": "\(configuration.keyID)",
            "base_url": "\(configuration.baseURL)",
        ])
        return configuration
    }

    /// AdMob's verification keys, loaded once now; nil when rewarded ads are off.
    /// - Throws: ``ConfigurationError`` when the keys' file or URL cannot be read.
    public func loadAdMobKeys(clock: any ServiceClock, logger: Logger) async throws(ConfigurationError) -> AdMobKeys? {
        guard adMobKeysFile != nil || adMobKeysURL != nil else { return nil }
        let keys = AdMobKeys(source: .init(file: adMobKeysFile, url: adMobKeysURL), clock: clock, logger: logger)
        do {
            try await keys.load()
        } catch {
            throw ConfigurationError(variable: adMobKeysFile != nil ? "SUBSYNC_ADMOB_KEYS_FILE" : "SUBSYNC_ADMOB_KEYS_URL", message: "\(error)")
        }
        if await keys.count == 0 { logger.warning("no AdMob key could be loaded yet: rewarded-ad callbacks are refused until one is") }
        return keys
    }
}
