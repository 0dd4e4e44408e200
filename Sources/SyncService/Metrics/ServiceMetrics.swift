import Metrics

/// The service's own metrics (swift-metrics; exported by swift-prometheus at `/metrics`).
/// HTTP request counts and latencies come from Hummingbird's `MetricsMiddleware`.
enum ServiceMetrics {
    /// Deliveries a claim held back because their endpoint's secret does not open
    /// (`DeliveryStore.SecretHold`).
    static let deliveriesHeldForSecret = Counter(label: "subsync_webhook_deliveries_held_unreadable_secret_total")
    static let reportsAccepted = Counter(label: "subsync_reports_accepted_total")
    static let reportsDuplicate = Counter(label: "subsync_reports_duplicate_total")
    static let reportsResolved = Counter(label: "subsync_reports_resolved_total")
    static let eventsWritten = Counter(label: "subsync_events_written_total")
    static let accountsFailed = Counter(label: "subsync_accounts_failed_total")
    /// Accounts a resolution batch queued again because another transaction held them.
    static let accountsDeferred = Counter(label: "subsync_accounts_deferred_total")
    static let sweptAccounts = Counter(label: "subsync_sweeper_accounts_total")
    static let batchSize = Recorder(label: "subsync_resolution_batch_reports")
    static let batchDuration = Metrics.Timer(label: "subsync_resolution_batch_duration_seconds", preferredDisplayUnit: .seconds)
    static let inboxDepth = Gauge(label: "subsync_inbox_depth")
    static let resolutionLag = Gauge(label: "subsync_resolution_lag_seconds")
    static let quarantined = Gauge(label: "subsync_reports_quarantined")

    /// Signed transactions and notifications refused, by the verifier's code (or
    /// `signature_required`): a rise means forged or misconfigured clients.
    static func signatureRefused(_ code: String) -> Counter {
        Counter(label: "subsync_signatures_refused_total", dimensions: [("code", code)])
    }
    static let signedReportsVerified = Counter(label: "subsync_signed_reports_verified_total")
    /// Sync requests refused by the per-account daily report quota.
    static let reportQuotaRefused = Counter(label: "subsync_report_quota_refused_total")
    /// StoreKit certificate chains built and checked (the costly step of verification).
    static let chainValidations = Counter(label: "subsync_storekit_chain_validations_total")
    /// StoreKit tokens answered from the cache of tokens that verified before (sent again as they were).
    static let tokenCacheHits = Counter(label: "subsync_storekit_token_cache_hits_total")
    /// Verified purchases whose `appAccountToken` was not the reporting account's (not bound).
    static let unprovenAppAccountTokens = Counter(label: "subsync_unproven_app_account_tokens_total")
    /// What became of a purchase another account had; the raw value is the metric's label.
    enum BindingConflictOutcome: String {
        /// Refused (policy `reject`).
        case rejected
        /// Moved to the reporting account (policy `transfer`).
        case transferred
    }
    /// Purchases refused (`reject`) or moved (`transfer`) because another account had them.
    static func bindingConflicts(_ outcome: BindingConflictOutcome) -> Counter {
        Counter(label: "subsync_binding_conflicts_total", dimensions: [("outcome", outcome.rawValue)])
    }
    /// What became of a window of the App Store notification backfill; the raw value is the
    /// metric's label.
    enum BackfillWindowOutcome: String {
        /// Read through.
        case read
        /// Not read: the checkpoint waits at the first such window.
        case failed
        /// Failed run after run while later ones were read: left behind.
        case skipped
    }
    /// Windows of the App Store notification backfill, by outcome.
    static func backfillWindows(_ outcome: BackfillWindowOutcome) -> Counter {
        Counter(label: "subsync_appstore_backfill_windows_total", dimensions: [("outcome", outcome.rawValue)])
    }
    /// App Store Server Notifications handled, by status (``NotificationController/Answer/Status``,
    /// or `rate_limited` for those refused before they were read).
    static func storeNotifications(_ status: String) -> Counter {
        Counter(label: "subsync_store_notifications_total", dimensions: [("status", status)])
    }
}
