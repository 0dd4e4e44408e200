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
    /// `SUBSYNC_DB_ANSWER_TIMEOUT_SECONDS`: the longest silence from PostgreSQL while a statement
    /// runs before its connection is given up (see `ConnectionConfiguration.answerTimeout`).
    public var databaseAnswerTimeout: Double = 15
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

    /// Reads the environment; unset variables keep their defaults.
    ///
    /// - Throws: ``ConfigurationError`` naming the variable whose value is unusable.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws -> ServiceConfiguration {
        var configuration = ServiceConfiguration()
        if let url = environment["DATABASE_URL"], !url.isEmpty { configuration.databaseURL = url }
        if let host = environment["SUBSYNC_HOST"], !host.isEmpty { configuration.host = host }
        if let port = environment["SUBSYNC_PORT"] {
            configuration.port = try parsePort(port, name: "SUBSYNC_PORT")
        }
        if let directory = environment["SUBSYNC_DATA_DIR"], !directory.isEmpty { configuration.dataDirectory = directory }
        if let port = environment["SUBSYNC_EMBEDDED_PG_PORT"] {
            configuration.embeddedPostgresPort = try parsePort(port, name: "SUBSYNC_EMBEDDED_PG_PORT")
        }
        if let size = environment["SUBSYNC_DB_POOL_SIZE"] {
            guard let value = Int(size), (1...500).contains(value) else {
                throw ConfigurationError(variable: "SUBSYNC_DB_POOL_SIZE", message: "must be a whole number from 1 to 500, got \"\(size)\"")
            }
            configuration.databasePoolSize = value
        }
        if let text = environment["SUBSYNC_RATE_LIMIT_SHARED"] {
            configuration.sharedRateLimits = try parseBool(text, name: "SUBSYNC_RATE_LIMIT_SHARED")
        }
        if let text = environment["SUBSYNC_DB_ANSWER_TIMEOUT_SECONDS"] {
            configuration.databaseAnswerTimeout = Double(try parseInt(text, name: "SUBSYNC_DB_ANSWER_TIMEOUT_SECONDS", range: 1...3600))
        }
        if let level = environment["SUBSYNC_LOG_LEVEL"] {
            guard let value = Logger.Level(rawValue: level.lowercased()) else {
                throw ConfigurationError(variable: "SUBSYNC_LOG_LEVEL", message: "must be one of trace, debug, info, notice, warning, error, critical; got \"\(level)\"")
            }
            configuration.logLevel = value
        }
        configuration.adminKey = try secret("SUBSYNC_ADMIN_KEY", in: environment, characters: 16)
        configuration.adminKeys = try adminKeys(from: environment)
        if let shared = configuration.adminKey, configuration.adminKeys.values.contains(shared) {
            throw ConfigurationError(variable: "SUBSYNC_ADMIN_KEYS", message: "holds the same key as SUBSYNC_ADMIN_KEY under another name")
        }
        configuration.tokenSecret = try secret("SUBSYNC_TOKEN_SECRET", in: environment, bytes: 32)
        configuration.previousTokenSecret = try secret("SUBSYNC_TOKEN_SECRET_PREVIOUS", in: environment, bytes: 32)
        configuration.tokenMaximumLifetime = try tokenMaximumLifetime(from: environment)
        configuration.metricsToken = try secret("SUBSYNC_METRICS_TOKEN", in: environment, characters: 16)
        configuration.appAccountTokenKey = try secret("SUBSYNC_APP_ACCOUNT_TOKEN_KEY", in: environment, bytes: 32)
        configuration.secretSealer = try sealer(from: environment)
        if let text = environment["SUBSYNC_WORKERS"] {
            configuration.workers = try parseInt(text, name: "SUBSYNC_WORKERS", range: 0...64)
        }
        if let text = environment["SUBSYNC_BATCH_SIZE"] {
            configuration.batchSize = try parseInt(text, name: "SUBSYNC_BATCH_SIZE", range: 1...5000)
        }
        if let text = environment["SUBSYNC_POLL_INTERVAL_MS"] {
            configuration.pollInterval = .milliseconds(try parseInt(text, name: "SUBSYNC_POLL_INTERVAL_MS", range: 10...60_000))
        }
        if let text = environment["SUBSYNC_USAGE_LATE_WINDOW_HOURS"] {
            let hours = try parseInt(text, name: "SUBSYNC_USAGE_LATE_WINDOW_HOURS", range: 1...Int(UsagePolicy.maximumLateWindow / 3600))
            configuration.usagePolicy.lateWindow = TimeInterval(hours) * 3600
        }
        if let text = environment["SUBSYNC_USAGE_MAX_ENTRIES_PER_PERIOD"] {
            configuration.usagePolicy.maximumEntriesPerPeriod = try parseInt(text, name: "SUBSYNC_USAGE_MAX_ENTRIES_PER_PERIOD", range: 1...10_000_000)
        }
        if let text = environment["SUBSYNC_USAGE_MAX_OPEN_HOLDS"] {
            configuration.usagePolicy.maximumOpenHolds = try parseInt(text, name: "SUBSYNC_USAGE_MAX_OPEN_HOLDS", range: 1...10_000)
        }
        if let text = environment["SUBSYNC_SWEEP_INTERVAL_MS"] {
            configuration.sweepInterval = .milliseconds(try parseInt(text, name: "SUBSYNC_SWEEP_INTERVAL_MS", range: 10...60_000))
        }
        if let path = environment["SUBSYNC_CATALOGUE"], !path.isEmpty { configuration.cataloguePath = path }
        if let text = environment["SUBSYNC_WEBHOOK_ALLOW"] {
            do {
                configuration.webhookAddressGuard = try AddressGuard(allowList: text)
            } catch {
                throw ConfigurationError(variable: "SUBSYNC_WEBHOOK_ALLOW", message: error.description)
            }
        }
        if let text = environment["SUBSYNC_WEBHOOK_RETRY_SCHEDULE"] {
            configuration.webhookRetrySchedule = try RetrySchedule(parsing: text)
        }
        if let text = environment["SUBSYNC_WEBHOOK_DISABLE_AFTER_SECONDS"] {
            configuration.webhookDisableAfter = TimeInterval(try parseInt(text, name: "SUBSYNC_WEBHOOK_DISABLE_AFTER_SECONDS", range: 1...31_536_000))
        }
        if let text = environment["SUBSYNC_WEBHOOK_TIMEOUT_MS"] {
            configuration.webhookTimeout = .milliseconds(try parseInt(text, name: "SUBSYNC_WEBHOOK_TIMEOUT_MS", range: 100...120_000))
        }
        if let text = environment["SUBSYNC_RATE_LIMIT_ACCOUNT"] {
            configuration.accountRateLimit = text == "off" ? nil : try RateLimiter.Limit(parsing: text, variable: "SUBSYNC_RATE_LIMIT_ACCOUNT")
        }
        if let text = environment["SUBSYNC_MAX_WAIT_MS"] {
            configuration.maximumWaitMilliseconds = try parseInt(text, name: "SUBSYNC_MAX_WAIT_MS", range: 0...60_000)
        }
        if let text = environment["SUBSYNC_REPORTS_PER_ACCOUNT_PER_DAY"] {
            if text == "off" {
                configuration.accountReportQuota = nil
            } else {
                let perDay = try parseInt(text, name: "SUBSYNC_REPORTS_PER_ACCOUNT_PER_DAY", range: 100...10_000_000)
                configuration.accountReportQuota = RateLimiter.Limit(ratePerSecond: Double(perDay) / 86_400, burst: Double(perDay))
            }
        }
        if let text = environment["SUBSYNC_TRUSTED_PROXIES"] {
            var header = TrustedProxies.Header.xForwardedFor
            if let name = environment["SUBSYNC_TRUSTED_PROXY_HEADER"], !name.isEmpty {
                guard let chosen = TrustedProxies.Header(rawValue: name.lowercased()) else {
                    throw ConfigurationError(variable: "SUBSYNC_TRUSTED_PROXY_HEADER", message: "must be x-forwarded-for or forwarded, got \"\(name.prefix(40))\"")
                }
                header = chosen
            }
            do {
                configuration.trustedProxies = try TrustedProxies(list: text, header: header)
            } catch {
                throw ConfigurationError(variable: "SUBSYNC_TRUSTED_PROXIES", message: "\(error.description) (\"\(text.prefix(200))\")")
            }
        }
        if let text = environment["SUBSYNC_RATE_LIMIT_NOTIFICATIONS"] {
            configuration.notificationRateLimit =
                text == "off" ? nil : try RateLimiter.Limit(parsing: text, variable: "SUBSYNC_RATE_LIMIT_NOTIFICATIONS")
        }
        if let text = environment["SUBSYNC_RATE_LIMIT_DEVICE"] {
            configuration.deviceRateLimit = text == "off" ? nil : try RateLimiter.Limit(parsing: text, variable: "SUBSYNC_RATE_LIMIT_DEVICE")
        }
        if let text = environment["SUBSYNC_DELIVERY_WORKERS"] {
            configuration.deliveryWorkers = try parseInt(text, name: "SUBSYNC_DELIVERY_WORKERS", range: 0...16)
        }
        if let text = environment["SUBSYNC_HTTP_IDLE_TIMEOUT_SECONDS"] {
            configuration.httpIdleTimeout = .seconds(try parseInt(text, name: "SUBSYNC_HTTP_IDLE_TIMEOUT_SECONDS", range: 1...3600))
        }
        if let text = environment["SUBSYNC_HTTP_HEAD_TIMEOUT_SECONDS"] {
            configuration.httpHeadTimeout = .seconds(try parseInt(text, name: "SUBSYNC_HTTP_HEAD_TIMEOUT_SECONDS", range: 1...600))
        }
        if let text = environment["SUBSYNC_HTTP_REQUEST_TIMEOUT_SECONDS"] {
            configuration.httpRequestTimeout = .seconds(try parseInt(text, name: "SUBSYNC_HTTP_REQUEST_TIMEOUT_SECONDS", range: 10...3600))
        }
        if let text = environment["SUBSYNC_HTTP_MAX_CONNECTIONS"] {
            configuration.maximumConnections = try parseInt(text, name: "SUBSYNC_HTTP_MAX_CONNECTIONS", range: 16...1_000_000)
        }
        if let text = environment["SUBSYNC_HTTP_MAX_CONNECTIONS_PER_SOURCE"] {
            configuration.maximumConnectionsPerSource = try parseInt(
                text, name: "SUBSYNC_HTTP_MAX_CONNECTIONS_PER_SOURCE", range: 1...configuration.maximumConnections)
        }
        if let text = environment["SUBSYNC_REQUIRE_SIGNED"], !text.isEmpty {
            configuration.requireSigned = try parseBool(text, name: "SUBSYNC_REQUIRE_SIGNED")
        }
        if let text = environment["SUBSYNC_APPLE_ROOT_CERTIFICATES"], !text.isEmpty {
            configuration.appleRootCertificatePaths = text.split(whereSeparator: { $0 == ":" || $0 == "," })
                .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        if let text = environment["SUBSYNC_BUNDLE_ID"], !text.isEmpty { configuration.bundleID = text }
        if let text = environment["SUBSYNC_ADMOB_KEYS_FILE"], !text.isEmpty { configuration.adMobKeysFile = text }
        if let text = environment["SUBSYNC_ADMOB_REWARD_TOKENS"], !text.isEmpty {
            switch text.lowercased() {
            case "on", "true", "1": configuration.adMobRewardTokens = true
            case "off", "false", "0": configuration.adMobRewardTokens = false
            default: throw ConfigurationError(variable: "SUBSYNC_ADMOB_REWARD_TOKENS", message: "must be on or off, got \"\(text.prefix(40))\"")
            }
        }
        if let text = environment["SUBSYNC_ADMOB_AD_UNITS"] {
            configuration.adMobAdUnits = Set(text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
        }
        if let text = environment["SUBSYNC_ADMOB_KEYS_URL"], !text.isEmpty {
            // The keys decide whose rewards are genuine: fetched over TLS, or from this machine.
            let components = URLComponents(string: text)
            let scheme = components?.scheme?.lowercased()
            let local = scheme == "http" && components?.host.map(AppStoreAPISettings.isLoopback) == true
            guard scheme == "https" || local else {
                throw ConfigurationError(
                    variable: "SUBSYNC_ADMOB_KEYS_URL",
                    message: "must be an https:// URL (http:// only to a loopback address), got \"\(text.prefix(80))\"")
            }
            configuration.adMobKeysURL = text
        }
        if let text = environment["SUBSYNC_STORE_ENVIRONMENTS"] {
            var environments: Set<StoreEnvironment> = []
            for name in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces).lowercased() }) where !name.isEmpty {
                guard let environment = StoreEnvironment(rawValue: name) else {
                    throw ConfigurationError(
                        variable: "SUBSYNC_STORE_ENVIRONMENTS",
                        message: "must list environments among \(StoreEnvironment.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(name.prefix(40))\"")
                }
                environments.insert(environment)
            }
            guard !environments.isEmpty else {
                throw ConfigurationError(variable: "SUBSYNC_STORE_ENVIRONMENTS", message: "must name at least one environment")
            }
            configuration.storeEnvironments = environments
        }
        if let text = environment["SUBSYNC_APP_APPLE_ID"], !text.isEmpty {
            guard let id = Int64(text), id > 0 else {
                throw ConfigurationError(variable: "SUBSYNC_APP_APPLE_ID", message: "must be the app's numeric Apple id, got \"\(text.prefix(40))\"")
            }
            configuration.appAppleID = id
        }
        configuration.appStoreAPI = try AppStoreAPISettings(environment: environment)
        if let text = environment["SUBSYNC_APPSTORE_BACKFILL_INTERVAL"], !text.isEmpty {
            configuration.appStoreBackfillInterval = .seconds(try parseInt(text, name: "SUBSYNC_APPSTORE_BACKFILL_INTERVAL", range: 60...86_400))
        }
        if let text = environment["SUBSYNC_ACCOUNT_BINDING"], !text.isEmpty {
            guard let policy = BindingPolicy(rawValue: text.lowercased()) else {
                throw ConfigurationError(variable: "SUBSYNC_ACCOUNT_BINDING", message: "must be reject or transfer, got \"\(text.prefix(40))\"")
            }
            configuration.accountBinding = policy
        }
        if environment["SUBSYNC_DB_POOL_SIZE"] == nil {
            configuration.databasePoolSize = configuration.recommendedPoolSize
        }
        return configuration
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

    /// Named admin keys: `SUBSYNC_ADMIN_KEYS` as `name=key` pairs separated by commas, and/or
    /// `SUBSYNC_ADMIN_KEYS_FILE`, a file of `name=key` lines (`#` comments and blank lines
    /// ignored). Names are 1-64 characters of letters, digits and `._@-`, keys at least 16
    /// characters; no name or key twice.
    public static func adminKeys(from environment: [String: String]) throws -> [String: String] {
        var keys: [String: String] = [:]
        func add(_ entry: Substring, from variable: String) throws {
            let text = entry.trimmingCharacters(in: .whitespaces)
            guard !text.isEmpty, !text.hasPrefix("#") else { return }
            let parts = text.split(separator: "=", maxSplits: 1)
            let name = parts.first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            // Never echo an entry without `=`: it may be a key whose name was forgotten.
            guard parts.count == 2 else {
                throw ConfigurationError(variable: variable, message: "entries are name=key; entry \(keys.count + 1) has no '='")
            }
            guard (1...64).contains(name.count),
                name.unicodeScalars.allSatisfy({ $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "._@-".unicodeScalars.contains($0)) })
            else {
                throw ConfigurationError(
                    variable: variable, message: "names are 1-64 letters, digits or ._@-; entry \(keys.count + 1)'s name is not")
            }
            // Errors name the entry by its position only: what stands left of a '=' may be a
            // key pasted without a name (base64 ends in '=').
            let entry = keys.count + 1
            let key = parts[1].trimmingCharacters(in: .whitespaces)
            guard key.count >= 16 else {
                throw ConfigurationError(variable: variable, message: "entry \(entry)'s key must be at least 16 characters")
            }
            guard name != Authenticator.legacyAdminName else {
                throw ConfigurationError(variable: variable, message: "entry \(entry) is named \"\(Authenticator.legacyAdminName)\", the name of the shared SUBSYNC_ADMIN_KEY; choose another")
            }
            guard keys[name] == nil else { throw ConfigurationError(variable: variable, message: "entry \(entry) repeats an earlier name") }
            guard !keys.values.contains(key) else {
                throw ConfigurationError(variable: variable, message: "entry \(entry) has a key another name has")
            }
            keys[name] = key
        }
        if let text = environment["SUBSYNC_ADMIN_KEYS"] {
            for entry in text.split(separator: ",") { try add(entry, from: "SUBSYNC_ADMIN_KEYS") }
        }
        if let path = environment["SUBSYNC_ADMIN_KEYS_FILE"], !path.isEmpty {
            let text: String
            do {
                text = try String(contentsOfFile: path, encoding: .utf8)
            } catch {
                throw ConfigurationError(variable: "SUBSYNC_ADMIN_KEYS_FILE", message: "cannot be read (\(path))")
            }
            for line in text.split(whereSeparator: \.isNewline) { try add(line, from: "SUBSYNC_ADMIN_KEYS_FILE") }
        }
        return keys
    }

    /// The webhook-secret sealer of `SUBSYNC_SECRET_KEYS` (comma-separated, current first).
    public static func sealer(from environment: [String: String]) throws -> SecretSealer {
        guard let text = environment["SUBSYNC_SECRET_KEYS"], !text.isEmpty else { return .none }
        do {
            return try SecretSealer(keys: text.split(separator: ",").map(String.init))
        } catch {
            throw ConfigurationError(variable: "SUBSYNC_SECRET_KEYS", message: "\(error)")
        }
    }

    /// A key or secret from `environment`: nil when unset or empty, else at least `characters`
    /// characters or `bytes` bytes of UTF-8 long (a short one is a configuration error, never
    /// silently used).
    static func secret(_ name: String, in environment: [String: String], characters: Int = 0, bytes: Int = 0) throws -> String? {
        guard let value = environment[name], !value.isEmpty else { return nil }
        if value.count < characters {
            throw ConfigurationError(variable: name, message: "must be at least \(characters) characters")
        }
        if value.utf8.count < bytes {
            throw ConfigurationError(variable: name, message: "must be at least \(bytes) bytes")
        }
        return value
    }

    /// `SUBSYNC_TOKEN_MAX_LIFETIME` of `environment` (seconds, one minute to one year), the
    /// default when unset: what `serve` enforces and `subsync tokens mint` keeps under.
    public static func tokenMaximumLifetime(from environment: [String: String]) throws -> TimeInterval {
        guard let text = environment["SUBSYNC_TOKEN_MAX_LIFETIME"], !text.isEmpty else { return Authenticator.defaultMaximumLifetime }
        return TimeInterval(try parseInt(text, name: "SUBSYNC_TOKEN_MAX_LIFETIME", range: 60...31_536_000))
    }

    static func parseInt(_ text: String, name: String, range: ClosedRange<Int>) throws -> Int {
        guard let value = Int(text), range.contains(value) else {
            throw ConfigurationError(variable: name, message: "must be a whole number from \(range.lowerBound) to \(range.upperBound), got \"\(text)\"")
        }
        return value
    }

    static func parseBool(_ text: String, name: String) throws -> Bool {
        switch text.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default: throw ConfigurationError(variable: name, message: "must be true or false, got \"\(text.prefix(40))\"")
        }
    }

    static func parsePort(_ text: String, name: String) throws -> Int {
        guard let value = Int(text), (0...65_535).contains(value) else {
            throw ConfigurationError(variable: name, message: "must be a port number from 0 to 65535, got \"\(text)\"")
        }
        return value
    }
}

/// A configuration value that cannot be used, with the variable or flag it came from.
public struct ConfigurationError: Error, CustomStringConvertible {
    public var variable: String
    public var message: String

    public init(variable: String, message: String) {
        self.variable = variable
        self.message = message
    }

    public var description: String { "\(variable) \(message)" }
}
