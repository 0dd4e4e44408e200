import Logging
import Postgres
import Prometheus
import SyncCore
import SyncStore

/// What the application needs from outside: the database, the catalogue, credentials, metrics.
public struct ServiceDependencies: Sendable {
    public var pool: ConnectionPool
    /// Used by the process's NOTIFY listener (`NotificationForwarder`, a connection outside the pool).
    public var connectionConfiguration: ConnectionConfiguration
    public var catalogue: Catalogue
    public var authenticator: Authenticator
    public var metricsRegistry: PrometheusCollectorRegistry
    /// The one clock of the service: resolution, sweeper, rate limits, tokens, webhook schedule.
    public var clock: any ServiceClock
    /// Verifies StoreKit signed transactions and App Store notifications; `nil` when not configured.
    public var storeKitVerifier: StoreKitVerifier?
    /// AdMob's verification keys, loaded; `nil` when rewarded ads are not configured.
    public var adMobKeys: AdMobKeys?
    /// The App Store Server API client; `nil` when no key is configured (docs/STORE.md).
    public var appStoreAPI: AppStoreServerAPI?

    public init(
        pool: ConnectionPool,
        catalogue: Catalogue,
        authenticator: Authenticator,
        metricsRegistry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(),
        clock: any ServiceClock = SystemClock(),
        storeKitVerifier: StoreKitVerifier? = nil,
        adMobKeys: AdMobKeys? = nil,
        appStoreAPI: AppStoreServerAPI? = nil
    ) {
        self.storeKitVerifier = storeKitVerifier
        self.appStoreAPI = appStoreAPI
        self.adMobKeys = adMobKeys
        self.pool = pool
        self.connectionConfiguration = pool.configuration.connection
        self.catalogue = catalogue
        self.authenticator = authenticator
        self.metricsRegistry = metricsRegistry
        self.clock = clock
    }
}

extension ServiceDependencies {
    /// These dependencies with an authenticator that refuses revoked device tokens (read from
    /// ``pool``).
    func checkingTokenRevocations() -> ServiceDependencies {
        var dependencies = self
        dependencies.authenticator.revocations = TokenRevocationCache(store: TokenRevocations(pool: pool), clock: clock)
        return dependencies
    }
}

extension ServiceDependencies {
    /// The optional parts these dependencies bring, for ``ServiceConfiguration/check(_:)``.
    var parts: ServiceConfiguration.Parts {
        .init(storeKitVerification: storeKitVerifier != nil, appStoreAPI: appStoreAPI != nil, adMobKeys: adMobKeys != nil)
    }
}
