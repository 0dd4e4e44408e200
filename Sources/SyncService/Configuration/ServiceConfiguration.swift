import Curl
import Foundation
import Logging
import SyncCore
import SyncStore

/// Everything `subsync serve` can be told, from flags or environment variables.
///
/// Environment variable names are listed in docs/CONFIGURATION.md; flags of the
/// same meaning take precedence over them.
public struct ServiceConfiguration: Sendable {
    /// `DATABASE_URL`: a `postgresql://` URL. When nil, an embedded PostgreSQL is started.
    public var databaseURL: String?
    /// `SUBSYNC_HOST`: the address the HTTP server binds.
    public var host: String
    /// `SUBSYNC_PORT`: the HTTP port (0 picks a free one, for tests).
    public var port: Int
    /// `SUBSYNC_DATA_DIR`: where the embedded PostgreSQL keeps its data.
    public var dataDirectory: String
    /// `SUBSYNC_EMBEDDED_PG_PORT`: the embedded PostgreSQL's port number, which names only its Unix
    /// socket (the embedded server listens on no TCP address).
    public var embeddedPostgresPort: Int
    /// `SUBSYNC_DB_POOL_SIZE`: connections per process.
    public var databasePoolSize: Int
    /// Whether ``databasePoolSize`` was set rather than derived from the workers.
    public internal(set) var databasePoolSizeIsSet = false
    /// `SUBSYNC_DB_ANSWER_TIMEOUT_SECONDS`: the longest silence from PostgreSQL while a statement
    /// runs before its connection is given up (see `ConnectionConfiguration.answerTimeout`).
    public var databaseAnswerTimeout: Double = 15
    /// `SUBSYNC_CITUS_ROUTING`: on a Citus cluster, whether an account's sync writes and reads
    /// go straight to the worker node that holds it (`nodes`, the default) or through the
    /// coordinator (`coordinator`); nothing changes on one PostgreSQL (docs/CITUS.md,
    /// "How the pipeline runs on Citus").
    public var citusRoutesToNodes = true
    /// `SUBSYNC_LOG_LEVEL`: trace, debug, info, notice, warning, error, critical.
    public var logLevel: Logger.Level
    /// `SUBSYNC_ADMIN_KEY`: the bearer key of operators and the app's backend (any account),
    /// shared, named `admin` in audit records.
    public var adminKey: String?
    /// `SUBSYNC_ADMIN_KEYS` / `SUBSYNC_ADMIN_KEYS_FILE`: admin keys by the name of who holds
    /// each, which audit records carry (``adminKeys(from:)``).
    public var adminKeys: [String: String] = [:]
    /// `SUBSYNC_TOKEN_SECRET`: the HS256 secret of device account tokens.
    public var tokenSecret: String?
    /// `SUBSYNC_TOKEN_SECRET_PREVIOUS`: a former token secret whose tokens are still accepted
    /// (by their `kid`) during a rotation.
    public var previousTokenSecret: String?
    /// `SUBSYNC_TOKEN_MAX_LIFETIME`: seconds a device token may live at most (`exp` after `iat`),
    /// whatever its issuer set (``Authenticator/defaultMaximumLifetime``, 30 days, by default).
    public var tokenMaximumLifetime: TimeInterval = Authenticator.defaultMaximumLifetime
    /// `SUBSYNC_METRICS_TOKEN`: when set, `GET /metrics` needs `Authorization: Bearer <it>`.
    public var metricsToken: String?
    /// `SUBSYNC_SECRET_KEYS`: keys that seal webhook signing secrets at rest, current first
    /// (``SecretSealer``); `.none` stores them in clear.
    public var secretSealer: SecretSealer = .none
    /// `SUBSYNC_APP_ACCOUNT_TOKEN_KEY`: derives each account's `appAccountToken`
    /// (``AppAccountTokens``); without it only the account-UUID form binds. Never change it.
    public var appAccountTokenKey: String?
    /// `SUBSYNC_WORKERS`: resolution workers in this process (0: none, the API only).
    public var workers: Int
    /// `SUBSYNC_BATCH_SIZE`: accounts with pending reports a worker claims per transaction (with
    /// all their pending reports).
    public var batchSize: Int
    /// `SUBSYNC_POLL_INTERVAL_MS`: how often idle workers look for work without a NOTIFY.
    public var pollInterval: Duration
    /// `SUBSYNC_SWEEP_INTERVAL_MS`: how often the expiry sweeper looks for due accounts.
    public var sweepInterval: Duration
    /// `SUBSYNC_CATALOGUE`: path of the catalogue JSON; nil uses the built-in default.
    public var cataloguePath: String?
    /// `SUBSYNC_WEBHOOK_ALLOW`: CIDRs webhooks may reach although not public (e.g. `127.0.0.0/8`).
    public var webhookAddressGuard: AddressGuard = .publicOnly
    /// Whether ``webhookAddressGuard`` was set rather than left at its default.
    public internal(set) var webhookAddressGuardIsSet = false
    /// `SUBSYNC_WEBHOOK_RETRY_SCHEDULE`: seconds between attempts (default: about three days).
    public var webhookRetrySchedule: RetrySchedule = .standard
    /// `SUBSYNC_WEBHOOK_DISABLE_AFTER_SECONDS`: an endpoint failing this long is disabled.
    public var webhookDisableAfter: TimeInterval = 5 * 86_400
    /// `SUBSYNC_WEBHOOK_TIMEOUT_MS`: total time one delivery attempt may take.
    public var webhookTimeout: Duration = .seconds(15)
    /// `SUBSYNC_RATE_LIMIT_ACCOUNT`: sync requests per account (device tokens only); nil: none.
    public var accountRateLimit: RateLimiter.Limit? = RateLimiter.Limit(ratePerSecond: 2, burst: 60)
    /// `SUBSYNC_MAX_WAIT_MS`: the longest `wait_ms` a sync may ask for (larger values are clamped).
    public var maximumWaitMilliseconds: Int = SyncLimits.maximumWaitMilliseconds
    /// `SUBSYNC_REPORTS_PER_ACCOUNT_PER_DAY`: reports a device may send for one account in a day
    /// (a bucket of that size refilling over 24 h; per process, or shared by every process with
    /// `SUBSYNC_RATE_LIMIT_SHARED`), so one genuine signed
    /// transaction resent under fresh report ids cannot grow the database without bound.
    public var accountReportQuota: RateLimiter.Limit? = RateLimiter.Limit(ratePerSecond: 10_000 / 86_400, burst: 10_000)
    /// `SUBSYNC_RATE_LIMIT_NOTIFICATIONS`: App Store notifications per source address (the route
    /// takes no key, and each forged one costs a signature check). Apple retries what is refused.
    public var notificationRateLimit: RateLimiter.Limit? = RateLimiter.Limit(ratePerSecond: 20, burst: 200)
    /// `SUBSYNC_TRUSTED_PROXIES`: CIDRs of the reverse proxies in front of serve, whose
    /// `X-Forwarded-For` / `Forwarded` name the client for the limits by source address.
    public var trustedProxies: TrustedProxies = .none
    /// `SUBSYNC_RATE_LIMIT_DEVICE`: sync requests per device of an account; nil: none.
    public var deviceRateLimit: RateLimiter.Limit? = RateLimiter.Limit(ratePerSecond: 1, burst: 30)
    /// `SUBSYNC_RATE_LIMIT_SHARED`: whether the account, device and daily-quota limits are also
    /// kept in PostgreSQL (`rate_buckets`), so they hold across every `serve` process (default on).
    /// Each process's in-memory buckets still answer first, so a flood is refused without a query.
    public var sharedRateLimits = true
    /// `SUBSYNC_DELIVERY_WORKERS`: webhook delivery loops in this process (0: none). Each owns a
    /// libcurl multi handle on its own thread and a share of the accounts.
    public var deliveryWorkers: Int = 4
    /// `SUBSYNC_HTTP_IDLE_TIMEOUT_SECONDS`: a connection that neither reads nor writes this long
    /// is closed: idle keep-alive connections, and clients that stop half-way through a request.
    /// (Bodies the service refuses are read and thrown away by ``ErrorMiddleware``, so they do
    /// not wait for this.)
    public var httpIdleTimeout: Duration = .seconds(15)
    /// `SUBSYNC_HTTP_HEAD_TIMEOUT_SECONDS`: how long a connection may take to send a complete
    /// request head (from its opening, or from the previous response's end) before it is closed,
    /// however many bytes it trickles (``RequestHeadTimeoutHandler``).
    public var httpHeadTimeout: Duration = .seconds(10)
    /// `SUBSYNC_HTTP_REQUEST_TIMEOUT_SECONDS`: how long one request may take from its head to the
    /// end of its response, body and answer included (a slow upload, a client that stops
    /// reading), before the connection is closed. Above the longest `wait_ms`.
    public var httpRequestTimeout: Duration = .seconds(120)
    /// `SUBSYNC_HTTP_MAX_CONNECTIONS`: open connections past which serve stops accepting until
    /// one closes.
    public var maximumConnections = 1000
    /// `SUBSYNC_HTTP_MAX_CONNECTIONS_PER_SOURCE`: the most open connections one source address
    /// (an IPv6 /64) may hold (``ConnectionShares``); nil: an eighth of ``maximumConnections``,
    /// at least 2. A trusted proxy's connections take no share.
    public var maximumConnectionsPerSource: Int?

    /// The share of the open connections one source may hold.
    public var connectionsPerSource: Int {
        maximumConnectionsPerSource ?? max(2, maximumConnections / 8)
    }
    /// `SUBSYNC_REQUIRE_SIGNED`: whether device reports must carry a verifiable StoreKit 2
    /// `signed_transaction`. `nil` (unset) means on, except in the embedded development mode
    /// (no `DATABASE_URL`); see ``requiresSignedReports``.
    public var requireSigned: Bool?
    /// `SUBSYNC_APPLE_ROOT_CERTIFICATES`: paths (separated by `:` or `,`) of the trusted root
    /// certificates, DER or PEM (Apple Root CA G3 in production).
    public var appleRootCertificatePaths: [String] = []
    /// `SUBSYNC_BUNDLE_ID`: the app's bundle id, which signed transactions must carry.
    public var bundleID: String?
    /// `SUBSYNC_STORE_ENVIRONMENTS`: the StoreKit environments accepted (default production only:
    /// sandbox purchases cost nothing, so a production service must not grant access for them).
    public var storeEnvironments: Set<StoreEnvironment> = [.production]
    /// `SUBSYNC_ADMOB_KEYS_FILE`: AdMob's server-side verification keys, in AdMob's JSON format
    /// (`GET /v1/rewards/admob` is off without this or ``adMobKeysURL``).
    public var adMobKeysFile: String?
    /// `SUBSYNC_ADMOB_KEYS_URL`: where to fetch (and daily refresh) AdMob's keys through libcurl,
    /// e.g. `https://www.gstatic.com/admob/reward/verifier-keys.json`.
    public var adMobKeysURL: String?
    /// `SUBSYNC_ADMOB_AD_UNITS`: the app's rewarded ad unit ids (comma-separated). AdMob signs
    /// every publisher's callbacks with the same keys, so callbacks of other ad units are refused;
    /// required when AdMob keys are configured.
    public var adMobAdUnits: Set<String> = []
    /// `SUBSYNC_ADMOB_REWARD_TOKENS` (`on`, the default, or `off`): whether a rewarded ad's
    /// callback needs the account's reward token in `custom_data` (``RewardTokens``).
    public var adMobRewardTokens = true
    /// `SUBSYNC_APP_APPLE_ID`: the app's Apple id, checked on notifications that carry one.
    public var appAppleID: Int64?
    /// `SUBSYNC_ACCOUNT_BINDING`: what to do with a purchase that belongs to another account.
    public var accountBinding: BindingPolicy = .reject
    /// `SUBSYNC_USAGE_LATE_WINDOW_HOURS`: how late usage may be reported (calls made offline),
    /// 1 to 2,160 hours (90 days, the default); docs/USAGE.md "Late usage".
    /// `SUBSYNC_USAGE_MAX_ENTRIES_PER_PERIOD` (default 100,000) and `SUBSYNC_USAGE_MAX_OPEN_HOLDS`
    /// (default 100): bounds per account and meter, docs/USAGE.md "Bounds".
    public var usagePolicy: UsagePolicy = .default
    /// `SUBSYNC_APPSTORE_KEY_FILE`, `_KEY_ID`, `_ISSUER_ID`, `_ENVIRONMENT`, `_BASE_URL`: the App
    /// Store Server API (docs/STORE.md); `nil` without a key file (the store is never asked).
    public var appStoreAPI: AppStoreAPISettings?
    /// `SUBSYNC_APPSTORE_BACKFILL_INTERVAL`: seconds between two asks of Get Notification History
    /// (60 to 86,400; default 3,600), docs/STORE.md "Backfill".
    public var appStoreBackfillInterval: Duration = .seconds(3600)

    /// Whether unsigned device reports are refused: ``requireSigned`` when set, else on with a
    /// database URL and off in the embedded development mode.
    public var requiresSignedReports: Bool {
        requireSigned ?? (databaseURL != nil)
    }

    public init(
        databaseURL: String? = nil,
        host: String = "127.0.0.1",
        port: Int = 8080,
        dataDirectory: String = ".subsync",
        embeddedPostgresPort: Int = 54_329,
        databasePoolSize: Int = 10,
        logLevel: Logger.Level = .info,
        adminKey: String? = nil,
        tokenSecret: String? = nil,
        workers: Int = ServiceConfiguration.defaultWorkerCount,
        batchSize: Int = 500,
        pollInterval: Duration = .seconds(1),
        sweepInterval: Duration = .seconds(1),
        cataloguePath: String? = nil
    ) {
        self.adminKey = adminKey
        self.tokenSecret = tokenSecret
        self.workers = workers
        self.batchSize = batchSize
        self.pollInterval = pollInterval
        self.sweepInterval = sweepInterval
        self.cataloguePath = cataloguePath
        self.databaseURL = databaseURL
        self.host = host
        self.port = port
        self.dataDirectory = dataDirectory
        self.embeddedPostgresPort = embeddedPostgresPort
        self.databasePoolSize = databasePoolSize
        self.logLevel = logLevel
    }

    /// Sets the resolution workers, and the pool to match them unless its size was set.
    public mutating func setWorkers(_ count: Int) {
        workers = count
        if !databasePoolSizeIsSet { databasePoolSize = recommendedPoolSize }
    }

    /// Enough connections for every worker plus the sweeper, the metrics sampler and requests:
    /// workers must never wait for the pool behind the requests that wait for them.
    public var recommendedPoolSize: Int {
        max(10, workers + deliveryWorkers + 6)
    }

    /// Two resolution workers per core: each spends much of its time waiting on the database.
    public static var defaultWorkerCount: Int {
        max(2, ProcessInfo.processInfo.activeProcessorCount * 2)
    }
}
