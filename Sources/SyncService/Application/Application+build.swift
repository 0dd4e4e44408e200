import Curl
import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import Postgres
import Prometheus
import ServiceLifecycle
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

/// Builds the HTTP application with every route and the long-running services (resolution
/// workers, expiry sweeper, metrics sampler, database pool).
///
/// `subsync serve` calls this, and so do the tests (`app.test(.router)` / `.live`), so what is
/// tested is what runs. With `configuration.workers == 0` no worker, sweeper or sampler starts.
public func buildApplication(
    configuration: ServiceConfiguration,
    dependencies: ServiceDependencies,
    extraServices: [any Service] = [],
    logger: Logger
) -> some ApplicationProtocol {
    // Device tokens are checked against their account's revocation (sql/0041).
    let dependencies = dependencies.checkingTokenRevocations()
    let pool = dependencies.pool
    let arrivals = WakeSignal()
    let resolutions = WakeSignal()
    let engine = ResolutionEngine(pool: pool, catalogue: dependencies.catalogue, clock: dependencies.clock, logger: logger)
    // The shared rate-limit buckets: taken from by sync requests, forgotten when full by the sweeper.
    let rateBuckets = configuration.sharedRateLimits ? RateBuckets(pool: pool) : nil

    let router = Router(context: SubsyncRequestContext.self)
    router.add(middleware: LogRequestsMiddleware(.debug))
    router.add(middleware: MetricsMiddleware())
    router.add(middleware: ErrorMiddleware(logger: logger))
    HealthController(pool: pool, clock: dependencies.clock).addRoutes(to: router)
    router.get("metrics") { request, _ in
        if let token = configuration.metricsToken {
            let credential = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
            guard let credential, ConstantTime.equals(credential, token) else {
                throw APIError(.unauthorized, code: "unauthenticated", message: "GET /metrics needs Authorization: Bearer <SUBSYNC_METRICS_TOKEN>",
                               headers: [.wwwAuthenticate: "Bearer"])
            }
        }
        var buffer: [UInt8] = []
        dependencies.metricsRegistry.emit(into: &buffer)
        return Response(
            status: .ok,
            headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: buffer))
        )
    }
    router.get("openapi.yaml") { _, _ in
        Response(
            status: .ok,
            headers: [.contentType: "application/yaml"],
            body: .init(byteBuffer: ByteBuffer(bytes: PackageResources.openapi_yaml))
        )
    }
    let binder = TransactionBinder(pool: pool, engine: engine, policy: configuration.accountBinding)
    let tokens = AppAccountTokens(key: configuration.appAccountTokenKey)
    let usage = UsageController(
        ledger: UsageLedger(pool: pool, catalogue: dependencies.catalogue, policy: configuration.usagePolicy),
        holds: UsageHolds(pool: pool, catalogue: dependencies.catalogue, policy: configuration.usagePolicy), catalogue: dependencies.catalogue,
        policy: configuration.usagePolicy, authenticator: dependencies.authenticator, clock: dependencies.clock,
        limiter: configuration.accountRateLimit.map { RateLimiter(limit: $0, clock: dependencies.clock) })
    usage.addRoutes(to: router)
    CatalogueController(catalogue: dependencies.catalogue, authenticator: dependencies.authenticator).addRoutes(to: router)
    RewardController(
        keys: dependencies.adMobKeys, adUnits: configuration.adMobAdUnits, ledger: UsageLedger(pool: pool, catalogue: dependencies.catalogue), catalogue: dependencies.catalogue,
        clock: dependencies.clock, limiter: configuration.notificationRateLimit.map { RateLimiter(limit: $0, clock: dependencies.clock) },
        proxies: configuration.trustedProxies,
        tokens: configuration.tokenSecret.map { RewardTokens(tokenSecret: $0, previousSecrets: configuration.previousTokenSecret.map { [$0] } ?? []) },
        requireTokens: configuration.adMobRewardTokens,
        authenticator: dependencies.authenticator, logger: logger
    ).addRoutes(to: router)
    AccountController(
        inbox: ReportInbox(pool: pool),
        reader: AccountReader(pool: pool, catalogue: dependencies.catalogue),
        catalogue: dependencies.catalogue,
        authenticator: dependencies.authenticator,
        arrivals: arrivals,
        resolutions: resolutions,
        clock: dependencies.clock,
        logger: logger,
        accountLimiter: configuration.accountRateLimit.map { RateLimiter(limit: $0, clock: dependencies.clock) },
        deviceLimiter: configuration.deviceRateLimit.map { RateLimiter(limit: $0, clock: dependencies.clock) },
        reportQuota: configuration.accountReportQuota.map { RateLimiter(limit: $0, clock: dependencies.clock) },
        sharedLimits: rateBuckets,
        admission: ReportAdmission(
            verifier: dependencies.storeKitVerifier, requireSigned: configuration.requiresSignedReports, tokens: tokens, logger: logger),
        binder: binder,
        tokens: tokens,
        maximumWaitMilliseconds: configuration.maximumWaitMilliseconds,
        usage: usage
    ).addRoutes(to: router)
    let notifications = NotificationController(
        verifier: dependencies.storeKitVerifier, binder: binder, store: AppStoreNotificationStore(pool: pool),
        tokens: tokens, limiter: configuration.notificationRateLimit.map { RateLimiter(limit: $0, clock: dependencies.clock) },
        proxies: configuration.trustedProxies, arrivals: arrivals, logger: logger
    )
    notifications.addRoutes(to: router)
    EndpointController(
        store: EndpointStore(pool: pool, sealer: configuration.secretSealer), authenticator: dependencies.authenticator,
        clock: dependencies.clock
    ).addRoutes(to: router)
    // The operator console and the admin routes it calls (docs/OPERATIONS.md).
    let history = MetricsHistory()
    let sampleInterval = Duration.seconds(5)
    var storeReconciler: AppStoreReconciler?
    if let api = dependencies.appStoreAPI, let verifier = dependencies.storeKitVerifier {
        storeReconciler = AppStoreReconciler(api: api, verifier: verifier, binder: binder, catalogue: dependencies.catalogue, logger: logger)
    }
    AdminController(
        pool: pool, catalogue: dependencies.catalogue, authenticator: dependencies.authenticator,
        deliveries: DeliveryStore(pool: pool, sealer: configuration.secretSealer), history: history,
        sampleInterval: sampleInterval, clock: dependencies.clock, logger: logger, storeReconciler: storeReconciler
    ).addRoutes(to: router)
    ConsoleController(enabled: dependencies.authenticator.hasAdminKeys).addRoutes(to: router)

    var services: [any Service] = [DatabaseService(pool: pool, logger: logger)]
    // One listening connection for the process: new reports wake the resolution workers, new
    // deliveries every delivery loop.
    let deliveryWakeups = WakeSignal()
    var routes: [String: WakeSignal] = [:]
    if configuration.workers > 0 { routes[ReportInbox.channel] = arrivals }
    if configuration.deliveryWorkers > 0 { routes[Outbox.deliveriesChannel] = deliveryWakeups }
    if !routes.isEmpty {
        services.append(NotificationForwarder(configuration: dependencies.connectionConfiguration, routes: routes, logger: logger))
    }
    if let api = dependencies.appStoreAPI, dependencies.storeKitVerifier != nil {
        // Missed App Store notifications, asked of the store (docs/STORE.md, "Backfill").
        services.append(NotificationBackfill(
            api: api, notifications: notifications, checkpoints: AppStoreBackfillCheckpoint(pool: pool),
            interval: configuration.appStoreBackfillInterval, clock: dependencies.clock, logger: logger))
    }
    if let keys = dependencies.adMobKeys {
        services.append(AdMobKeyRefresher(keys: keys, clock: dependencies.clock))
    }
    if configuration.workers > 0 {
        services.append(
            WorkerPool(
                engine: engine,
                workers: configuration.workers,
                batchSize: configuration.batchSize,
                pollInterval: configuration.pollInterval,
                arrivals: arrivals,
                resolutions: resolutions,
                logger: logger
            )
        )
        var storeCheck: AppStoreExpiryCheck?
        if let api = dependencies.appStoreAPI, let verifier = dependencies.storeKitVerifier {
            let check = AppStoreExpiryCheck(
                api: api, verifier: verifier, binder: binder, catalogue: dependencies.catalogue, clock: dependencies.clock, logger: logger)
            storeCheck = check
            services.append(AppStoreExpiryQuestions(check: check, interval: configuration.sweepInterval, clock: dependencies.clock))
        }
        services.append(
            ExpirySweeper(
                engine: engine, interval: configuration.sweepInterval, clock: dependencies.clock, resolutions: resolutions,
                rateBuckets: rateBuckets, storeCheck: storeCheck, logger: logger))
        services.append(
            MetricsSampler(
                pool: pool, interval: sampleInterval, history: history, registry: dependencies.metricsRegistry,
                clock: dependencies.clock, logger: logger))
    }
    if configuration.deliveryWorkers > 0 {
        var delivery = DeliveryWorker.Configuration()
        delivery.schedule = configuration.webhookRetrySchedule
        delivery.disableAfter = configuration.webhookDisableAfter
        delivery.totalTimeout = configuration.webhookTimeout
        delivery.connectTimeout = min(configuration.webhookTimeout, .seconds(5))
        delivery.pollInterval = configuration.pollInterval
        for index in 0..<configuration.deliveryWorkers {
            delivery.partition = (index, configuration.deliveryWorkers)
            services.append(
                DeliveryWorker(
                    store: DeliveryStore(pool: pool, sealer: configuration.secretSealer),
                    client: CurlClient(configuration: .init(addressGuard: configuration.webhookAddressGuard)),
                    wakeups: deliveryWakeups,
                    configuration: delivery,
                    clock: dependencies.clock,
                    logger: logger
                )
            )
        }
    }

    let shares = ConnectionShares(perSource: configuration.connectionsPerSource, proxies: configuration.trustedProxies)
    return Application(
        router: router,
        server: .http1(configuration: .init(
            additionalChannelHandlers: [
                ConnectionShareHandler(shares: shares),
                RequestHeadTimeoutHandler(
                    headTimeout: TimeAmount(configuration.httpHeadTimeout), requestTimeout: TimeAmount(configuration.httpRequestTimeout))
            ],
            idleTimeout: TimeAmount(configuration.httpIdleTimeout))),
        configuration: .init(
            address: .hostname(configuration.host, port: configuration.port),
            serverName: "subsync",
            // Past this many open connections serve stops accepting until one closes (the
            // kernel's backlog holds the rest): descriptors stay bounded whatever clients do.
            availableConnectionsDelegate: MaximumAvailableConnections(configuration.maximumConnections)
        ),
        services: services + extraServices,
        logger: logger
    )
}
