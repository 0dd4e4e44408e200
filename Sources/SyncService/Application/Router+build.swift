import Hummingbird
import SyncCore
import SyncStore

/// Every route of the service, each group owned by its controller (docs/API.md).
func buildRouter(_ parts: ApplicationParts) -> Router<SubsyncRequestContext> {
    let configuration = parts.configuration
    let pool = parts.pool
    let router = Router(context: SubsyncRequestContext.self)
    router.add(middleware: LogRequestsMiddleware(.debug))
    router.add(middleware: MetricsMiddleware())
    router.add(middleware: ErrorMiddleware(logger: parts.logger))
    HealthController(pool: pool, clock: parts.clock).addRoutes(to: router)
    MetricsController(registry: parts.dependencies.metricsRegistry, token: configuration.metricsToken).addRoutes(to: router)
    OpenAPIController().addRoutes(to: router)

    let usage = UsageController(
        ledger: UsageLedger(pool: pool, catalogue: parts.catalogue, policy: configuration.usagePolicy, router: parts.router),
        holds: UsageHolds(pool: pool, catalogue: parts.catalogue, policy: configuration.usagePolicy, router: parts.router),
        catalogue: parts.catalogue,
        policy: configuration.usagePolicy, authenticator: parts.authenticator, clock: parts.clock,
        limiter: parts.limiter(configuration.accountRateLimit))
    usage.addRoutes(to: router)
    CatalogueController(catalogue: parts.catalogue, authenticator: parts.authenticator).addRoutes(to: router)
    RewardController(
        keys: parts.dependencies.adMobKeys, adUnits: configuration.adMobAdUnits, ledger: UsageLedger(pool: pool, catalogue: parts.catalogue),
        catalogue: parts.catalogue, clock: parts.clock, limiter: parts.limiter(configuration.notificationRateLimit),
        proxies: configuration.trustedProxies,
        tokens: configuration.tokenSecret.map { RewardTokens(tokenSecret: $0, previousSecrets: configuration.previousTokenSecret.map { [$0] } ?? []) },
        requireTokens: configuration.adMobRewardTokens,
        authenticator: parts.authenticator, logger: parts.logger
    ).addRoutes(to: router)
    AccountController(
        authenticator: parts.authenticator,
        catalogue: parts.catalogue,
        reader: AccountReader(pool: pool, catalogue: parts.catalogue, router: parts.router),
        tokens: parts.tokens,
        limits: SyncRateLimits(
            account: parts.limiter(configuration.accountRateLimit), device: parts.limiter(configuration.deviceRateLimit),
            reportQuota: parts.limiter(configuration.accountReportQuota), shared: parts.rateBuckets, clock: parts.clock),
        intake: ReportIntake(
            inbox: ReportInbox(pool: pool, router: parts.router),
            admission: ReportAdmission(
                verifier: parts.dependencies.storeKitVerifier, requireSigned: configuration.requiresSignedReports, tokens: parts.tokens,
                logger: parts.logger),
            binder: parts.binder, arrivals: parts.arrivals, resolutions: parts.resolutions,
            maximumWaitMilliseconds: configuration.maximumWaitMilliseconds, clock: parts.clock, logger: parts.logger),
        usage: usage,
        clock: parts.clock
    ).addRoutes(to: router)
    parts.notifications.addRoutes(to: router)
    EndpointController(
        store: EndpointStore(pool: pool, sealer: configuration.secretSealer), authenticator: parts.authenticator, clock: parts.clock
    ).addRoutes(to: router)
    // The operator console and the admin routes it calls (docs/OPERATIONS.md).
    AdminController(
        pool: pool, catalogue: parts.catalogue, authenticator: parts.authenticator,
        deliveries: DeliveryStore(pool: pool, sealer: configuration.secretSealer), history: parts.history,
        sampleInterval: parts.sampleInterval, clock: parts.clock, logger: parts.logger,
        storeReconciler: parts.appStore.map {
            AppStoreReconciler(api: $0.api, verifier: $0.verifier, binder: parts.binder, catalogue: parts.catalogue, logger: parts.logger)
        }
    ).addRoutes(to: router)
    ConsoleController(enabled: parts.authenticator.hasAdminKeys).addRoutes(to: router)
    return router
}
