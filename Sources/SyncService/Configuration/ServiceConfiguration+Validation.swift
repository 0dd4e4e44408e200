extension ServiceConfiguration {
    /// Which of the optional parts a service is given. `serve` knows them from the settings
    /// before it reads a key; ``buildApplication(configuration:dependencies:extraServices:logger:)``
    /// from the dependencies it is handed. Both check them with ``check(_:)``, so a test that
    /// builds the application meets the same rules as the command.
    public struct Parts: Sendable {
        public var storeKitVerification: Bool
        public var appStoreAPI: Bool
        public var adMobKeys: Bool

        public init(storeKitVerification: Bool, appStoreAPI: Bool, adMobKeys: Bool) {
            self.storeKitVerification = storeKitVerification
            self.appStoreAPI = appStoreAPI
            self.adMobKeys = adMobKeys
        }
    }

    /// The parts these settings ask for.
    public var requestedParts: Parts {
        Parts(
            storeKitVerification: bundleID != nil && !appleRootCertificatePaths.isEmpty,
            appStoreAPI: appStoreAPI != nil,
            adMobKeys: adMobKeysFile != nil || adMobKeysURL != nil)
    }

    /// The rules between settings (each setting alone was checked as it was read):
    /// docs/CONFIGURATION.md names them.
    /// - Throws: ``ConfigurationError`` naming the setting to change.
    public func validate() throws(ConfigurationError) {
        if (bundleID != nil) != !appleRootCertificatePaths.isEmpty {
            throw ConfigurationError(
                variable: "SUBSYNC_APPLE_ROOT_CERTIFICATES", message: "and SUBSYNC_BUNDLE_ID: StoreKit verification needs both")
        }
        try check(requestedParts)
    }

    /// The rules that tie settings to the parts the service runs with.
    /// - Throws: ``ConfigurationError`` naming the setting to change.
    public func check(_ parts: Parts) throws(ConfigurationError) {
        if requiresSignedReports, !parts.storeKitVerification {
            throw ConfigurationError(
                variable: "SUBSYNC_REQUIRE_SIGNED",
                message: """
                    is on (the default with a DATABASE_URL), but StoreKit verification is not configured: set \
                    SUBSYNC_APPLE_ROOT_CERTIFICATES (e.g. AppleRootCA-G3.cer) and SUBSYNC_BUNDLE_ID, or \
                    SUBSYNC_REQUIRE_SIGNED=false for development
                    """)
        }
        if parts.appStoreAPI, !parts.storeKitVerification {
            throw ConfigurationError(
                variable: "SUBSYNC_APPSTORE_KEY_FILE",
                message: "is set, but the store's answers are verified like device reports: set SUBSYNC_APPLE_ROOT_CERTIFICATES and SUBSYNC_BUNDLE_ID")
        }
        if parts.adMobKeys {
            guard !adMobAdUnits.isEmpty else {
                throw ConfigurationError(
                    variable: "SUBSYNC_ADMOB_AD_UNITS",
                    message: "must list the app's rewarded ad unit ids: AdMob signs every publisher's callbacks with the same keys")
            }
            guard !adMobRewardTokens || tokenSecret != nil else {
                throw ConfigurationError(
                    variable: "SUBSYNC_TOKEN_SECRET",
                    message: "must be set with rewarded ads: each reward is bound to its account with a reward token signed under it (or set SUBSYNC_ADMOB_REWARD_TOKENS=off, and then a modified app can credit any account)")
            }
        }
    }
}
