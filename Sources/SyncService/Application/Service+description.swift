// Each running part names itself in a few words. swift-service-lifecycle names a service with
// `"\(service)"` when it is added to a group and in its log lines; for a struct without a
// description that is a reflective dump of every stored property (the whole catalogue for the
// worker pool, tens of kilobytes of debug log per start), built with runtime conformance lookups
// that slow every process start (docs/PERFORMANCE.md, "In the code").

extension DatabaseService: CustomStringConvertible {
    public var description: String { "DatabaseService" }
}

extension EmbeddedPostgresService: CustomStringConvertible {
    public var description: String { "EmbeddedPostgresService" }
}

extension WorkerPool: CustomStringConvertible {
    public var description: String { "WorkerPool(workers: \(workers), batch: \(batchSize))" }
}

extension NotificationForwarder: CustomStringConvertible {
    public var description: String { "NotificationForwarder(channels: \(routes.keys.sorted()))" }
}

extension ExpirySweeper: CustomStringConvertible {
    public var description: String { "ExpirySweeper" }
}

extension MetricsSampler: CustomStringConvertible {
    public var description: String { "MetricsSampler" }
}

extension DeliveryWorker: CustomStringConvertible {
    public var description: String {
        "DeliveryWorker(partition: \(configuration.partition.index) of \(configuration.partition.count))"
    }
}

extension AdMobKeyRefresher: CustomStringConvertible {
    var description: String { "AdMobKeyRefresher" }
}

extension AppStoreExpiryQuestions: CustomStringConvertible {
    public var description: String { "AppStoreExpiryQuestions" }
}
