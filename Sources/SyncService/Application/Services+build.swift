import Curl
import ServiceLifecycle
import SyncStore

/// The long-running parts of one process, in the order they start: the pool, the NOTIFY
/// listener, the App Store's backfill and AdMob's keys, the resolution workers with the sweeper
/// and the sampler, and the webhook delivery loops (docs/ARCHITECTURE.md).
func buildServices(_ parts: ApplicationParts) -> [any Service] {
    let configuration = parts.configuration
    let pool = parts.pool
    var services: [any Service] = [DatabaseService(pool: pool, logger: parts.logger)]
    if let router = parts.router {
        // Listed second, so stopped second to last: the routes that use its pools stop first.
        services.append(ShardMapRefresher(router: router, clock: parts.clock, logger: parts.logger))
    }
    // One listening connection for the process: new reports wake the resolution workers, new
    // deliveries every delivery loop.
    var routes: [String: WakeSignal] = [:]
    if configuration.workers > 0 { routes[ReportInbox.channel] = parts.arrivals }
    if configuration.deliveryWorkers > 0 { routes[Outbox.deliveriesChannel] = parts.deliveryWakeups }
    if !routes.isEmpty {
        services.append(NotificationForwarder(configuration: parts.dependencies.connectionConfiguration, routes: routes, logger: parts.logger))
    }
    if let api = parts.appStore?.api {
        // Missed App Store notifications, asked of the store (docs/STORE.md, "Backfill").
        services.append(NotificationBackfill(
            api: api, notifications: parts.notifications, checkpoints: AppStoreBackfillCheckpoint(pool: pool),
            interval: configuration.appStoreBackfillInterval, clock: parts.clock, logger: parts.logger))
    }
    if let keys = parts.dependencies.adMobKeys {
        services.append(AdMobKeyRefresher(keys: keys, clock: parts.clock))
    }
    if configuration.workers > 0 {
        services += resolutionServices(parts)
    }
    if configuration.deliveryWorkers > 0 {
        services += deliveryServices(parts)
    }
    return services
}

/// The resolution workers, the expiry sweeper (asking the App Store first when it can), and the
/// metrics sampler.
private func resolutionServices(_ parts: ApplicationParts) -> [any Service] {
    let configuration = parts.configuration
    var services: [any Service] = [
        WorkerPool(
            engine: parts.engine, workers: configuration.workers, batchSize: configuration.batchSize,
            pollInterval: configuration.pollInterval, arrivals: parts.arrivals, resolutions: parts.resolutions, logger: parts.logger)
    ]
    var storeCheck: AppStoreExpiryCheck?
    if let appStore = parts.appStore {
        let check = AppStoreExpiryCheck(
            api: appStore.api, verifier: appStore.verifier, binder: parts.binder, catalogue: parts.catalogue, clock: parts.clock,
            logger: parts.logger)
        storeCheck = check
        services.append(AppStoreExpiryQuestions(check: check, interval: configuration.sweepInterval, clock: parts.clock))
    }
    services.append(
        ExpirySweeper(
            engine: parts.engine, interval: configuration.sweepInterval, clock: parts.clock, resolutions: parts.resolutions,
            rateBuckets: parts.rateBuckets, storeCheck: storeCheck, logger: parts.logger))
    services.append(
        MetricsSampler(
            pool: parts.pool, interval: parts.sampleInterval, history: parts.history, registry: parts.dependencies.metricsRegistry,
            clock: parts.clock, logger: parts.logger))
    return services
}

/// One webhook delivery loop per `SUBSYNC_DELIVERY_WORKERS`, each with its share of the accounts.
private func deliveryServices(_ parts: ApplicationParts) -> [any Service] {
    let configuration = parts.configuration
    var shared = DeliveryWorker.Configuration()
    shared.schedule = configuration.webhookRetrySchedule
    shared.disableAfter = configuration.webhookDisableAfter
    shared.totalTimeout = configuration.webhookTimeout
    shared.connectTimeout = min(configuration.webhookTimeout, .seconds(5))
    shared.pollInterval = configuration.pollInterval
    return (0..<configuration.deliveryWorkers).map { index in
        var delivery = shared
        delivery.partition = (index, configuration.deliveryWorkers)
        return DeliveryWorker(
            store: DeliveryStore(pool: parts.pool, sealer: configuration.secretSealer, router: parts.router),
            client: CurlClient(configuration: .init(addressGuard: configuration.webhookAddressGuard)),
            wakeups: parts.deliveryWakeups,
            configuration: delivery,
            clock: parts.clock,
            logger: parts.logger
        )
    }
}
