import Logging
import Postgres
import SyncCore
import SyncStore

/// What the routes and the long-running services of one application share, made once by
/// ``buildApplication(configuration:dependencies:extraServices:logger:)``.
struct ApplicationParts: Sendable {
    let configuration: ServiceConfiguration
    let dependencies: ServiceDependencies
    let logger: Logger
    /// Raised by sync requests and by the NOTIFY listener: new reports for the workers.
    let arrivals = WakeSignal()
    /// Raised by workers after each committed batch; `wait_ms` waits on it.
    let resolutions = WakeSignal()
    /// Raised by the NOTIFY listener: new deliveries for the delivery loops.
    let deliveryWakeups = WakeSignal()
    let engine: ResolutionEngine
    let binder: TransactionBinder
    let tokens: AppAccountTokens
    /// The shared rate-limit buckets: taken from by sync requests, forgotten when full by the
    /// sweeper; nil with `SUBSYNC_RATE_LIMIT_SHARED=off`.
    let rateBuckets: RateBuckets?
    /// The console's recent figures: written by the sampler, read by the admin routes.
    let history = MetricsHistory()
    let sampleInterval = Duration.seconds(5)
    /// App Store notifications: a route, and the backfill that asks the store for missed ones.
    let notifications: NotificationController
    /// Sends an account's sync writes and reads to its worker node on Citus
    /// (`SUBSYNC_CITUS_ROUTING`); `nil` when they go through the coordinator.
    let router: AccountRouter?

    init(configuration: ServiceConfiguration, dependencies: ServiceDependencies, logger: Logger) {
        self.configuration = configuration
        self.dependencies = dependencies
        self.logger = logger
        let pool = dependencies.pool
        router = configuration.citusRoutesToNodes
            ? AccountRouter(coordinator: pool, nodePoolSize: pool.configuration.maximumConnections, logger: logger) : nil
        engine = ResolutionEngine(pool: pool, catalogue: dependencies.catalogue, clock: dependencies.clock, logger: logger, router: router)
        binder = TransactionBinder(pool: pool, engine: engine, policy: configuration.accountBinding)
        tokens = AppAccountTokens(key: configuration.appAccountTokenKey)
        rateBuckets = configuration.sharedRateLimits ? RateBuckets(pool: pool) : nil
        notifications = NotificationController(
            verifier: dependencies.storeKitVerifier, binder: binder, store: AppStoreNotificationStore(pool: pool),
            tokens: tokens, limiter: configuration.notificationRateLimit.map { RateLimiter(limit: $0, clock: dependencies.clock) },
            proxies: configuration.trustedProxies, arrivals: arrivals, logger: logger)
    }

    var pool: ConnectionPool { dependencies.pool }
    var catalogue: Catalogue { dependencies.catalogue }
    var clock: any ServiceClock { dependencies.clock }
    var authenticator: Authenticator { dependencies.authenticator }

    /// A bucket per key in this process for `limit`; nil when the limit is off.
    func limiter(_ limit: RateLimiter.Limit?) -> RateLimiter? {
        limit.map { RateLimiter(limit: $0, clock: clock) }
    }

    /// The App Store client and the verifier its answers go through, when both are configured.
    var appStore: (api: AppStoreServerAPI, verifier: StoreKitVerifier)? {
        guard let api = dependencies.appStoreAPI, let verifier = dependencies.storeKitVerifier else { return nil }
        return (api, verifier)
    }
}
