import Curl
import Foundation
import Logging
import SyncCore
import SyncStore

extension ServiceConfiguration {
    /// Reads the environment; unset variables keep their defaults.
    ///
    /// - Throws: ``ConfigurationError`` naming the variable whose value is unusable.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws -> ServiceConfiguration {
        var configuration = ServiceConfiguration()
        try readProcess(environment, into: &configuration)
        try readCredentials(environment, into: &configuration)
        try readWorkers(environment, into: &configuration)
        try readAccounts(environment, into: &configuration)
        try readWebhooks(environment, into: &configuration)
        try readLimits(environment, into: &configuration)
        try readHTTP(environment, into: &configuration)
        try readStoreKit(environment, into: &configuration)
        try readAdMob(environment, into: &configuration)
        try readAppStore(environment, into: &configuration)
        if !configuration.databasePoolSizeIsSet {
            configuration.databasePoolSize = configuration.recommendedPoolSize
        }
        return configuration
    }

    /// The process: where it listens, its database and its log.
    static func readProcess(_ environment: [String: String], into configuration: inout ServiceConfiguration) throws {
        configuration.databaseURL = databaseURL(from: environment)
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
            configuration.databasePoolSizeIsSet = true
        }
        if let text = environment["SUBSYNC_DB_ANSWER_TIMEOUT_SECONDS"] {
            configuration.databaseAnswerTimeout = Double(try parseInt(text, name: "SUBSYNC_DB_ANSWER_TIMEOUT_SECONDS", range: 1...3600))
        }
        if let routing = environment["SUBSYNC_CITUS_ROUTING"] {
            switch routing {
            case "nodes": configuration.citusRoutesToNodes = true
            case "coordinator": configuration.citusRoutesToNodes = false
            default:
                throw ConfigurationError(variable: "SUBSYNC_CITUS_ROUTING", message: "must be nodes or coordinator, got \"\(routing)\"")
            }
        }
        if let level = environment["SUBSYNC_LOG_LEVEL"] {
            guard let value = Logger.Level(rawValue: level.lowercased()) else {
                throw ConfigurationError(variable: "SUBSYNC_LOG_LEVEL", message: "must be one of trace, debug, info, notice, warning, error, critical; got \"\(level)\"")
            }
            configuration.logLevel = value
        }
    }

    /// Keys, secrets and tokens (docs/SECURITY.md).
    static func readCredentials(_ environment: [String: String], into configuration: inout ServiceConfiguration) throws {
        configuration.adminKey = try secret("SUBSYNC_ADMIN_KEY", in: environment, characters: 16)
        configuration.adminKeys = try adminKeys(from: environment)
        if let shared = configuration.adminKey, configuration.adminKeys.values.contains(shared) {
            throw ConfigurationError(variable: "SUBSYNC_ADMIN_KEYS", message: "holds the same key as SUBSYNC_ADMIN_KEY under another name")
        }
        configuration.tokenSecret = try tokenSecret(from: environment)
        configuration.previousTokenSecret = try secret("SUBSYNC_TOKEN_SECRET_PREVIOUS", in: environment, bytes: 32)
        configuration.tokenMaximumLifetime = try tokenMaximumLifetime(from: environment)
        configuration.metricsToken = try secret("SUBSYNC_METRICS_TOKEN", in: environment, characters: 16)
        configuration.appAccountTokenKey = try secret("SUBSYNC_APP_ACCOUNT_TOKEN_KEY", in: environment, bytes: 32)
        configuration.secretSealer = try sealer(from: environment)
    }

    /// Resolution workers, the sweeper and the catalogue.
    static func readWorkers(_ environment: [String: String], into configuration: inout ServiceConfiguration) throws {
        if let text = environment["SUBSYNC_WORKERS"] {
            configuration.workers = try parseInt(text, name: "SUBSYNC_WORKERS", range: 0...64)
        }
        if let text = environment["SUBSYNC_BATCH_SIZE"] {
            configuration.batchSize = try parseInt(text, name: "SUBSYNC_BATCH_SIZE", range: 1...5000)
        }
        if let text = environment["SUBSYNC_POLL_INTERVAL_MS"] {
            configuration.pollInterval = .milliseconds(try parseInt(text, name: "SUBSYNC_POLL_INTERVAL_MS", range: 10...60_000))
        }
        if let text = environment["SUBSYNC_SWEEP_INTERVAL_MS"] {
            configuration.sweepInterval = .milliseconds(try parseInt(text, name: "SUBSYNC_SWEEP_INTERVAL_MS", range: 10...60_000))
        }
        configuration.cataloguePath = cataloguePath(from: environment)
    }

    /// Usage bounds and the account-binding policy (docs/USAGE.md, docs/STORE.md).
    static func readAccounts(_ environment: [String: String], into configuration: inout ServiceConfiguration) throws {
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
        if let text = environment["SUBSYNC_ACCOUNT_BINDING"], !text.isEmpty {
            guard let policy = BindingPolicy(rawValue: text.lowercased()) else {
                throw ConfigurationError(variable: "SUBSYNC_ACCOUNT_BINDING", message: "must be reject or transfer, got \"\(text.prefix(40))\"")
            }
            configuration.accountBinding = policy
        }
    }

    /// Webhook delivery (docs/WEBHOOKS.md).
    static func readWebhooks(_ environment: [String: String], into configuration: inout ServiceConfiguration) throws {
        if let text = environment["SUBSYNC_WEBHOOK_ALLOW"] {
            do {
                configuration.webhookAddressGuard = try AddressGuard(allowList: text)
                configuration.webhookAddressGuardIsSet = true
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
        if let text = environment["SUBSYNC_DELIVERY_WORKERS"] {
            configuration.deliveryWorkers = try parseInt(text, name: "SUBSYNC_DELIVERY_WORKERS", range: 0...16)
        }
    }

    /// Rate limits and the proxies that name clients (docs/SECURITY.md).
    static func readLimits(_ environment: [String: String], into configuration: inout ServiceConfiguration) throws {
        if let text = environment["SUBSYNC_RATE_LIMIT_SHARED"] {
            configuration.sharedRateLimits = try parseBool(text, name: "SUBSYNC_RATE_LIMIT_SHARED")
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
    }

    /// The HTTP server's timeouts and connection bounds.
    static func readHTTP(_ environment: [String: String], into configuration: inout ServiceConfiguration) throws {
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
    }

    /// StoreKit verification (docs/STOREKIT.md).
    static func readStoreKit(_ environment: [String: String], into configuration: inout ServiceConfiguration) throws {
        if let text = environment["SUBSYNC_REQUIRE_SIGNED"], !text.isEmpty {
            configuration.requireSigned = try parseBool(text, name: "SUBSYNC_REQUIRE_SIGNED")
        }
        if let text = environment["SUBSYNC_APPLE_ROOT_CERTIFICATES"], !text.isEmpty {
            configuration.appleRootCertificatePaths = text.split(whereSeparator: { $0 == ":" || $0 == "," })
                .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        if let text = environment["SUBSYNC_BUNDLE_ID"], !text.isEmpty { configuration.bundleID = text }
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
    }

    /// Rewarded ads (docs/USAGE.md).
    static func readAdMob(_ environment: [String: String], into configuration: inout ServiceConfiguration) throws {
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
    }

    /// The App Store Server API (docs/STORE.md).
    static func readAppStore(_ environment: [String: String], into configuration: inout ServiceConfiguration) throws {
        configuration.appStoreAPI = try AppStoreAPISettings(environment: environment)
        if let text = environment["SUBSYNC_APPSTORE_BACKFILL_INTERVAL"], !text.isEmpty {
            configuration.appStoreBackfillInterval = .seconds(try parseInt(text, name: "SUBSYNC_APPSTORE_BACKFILL_INTERVAL", range: 60...86_400))
        }
    }

    /// `DATABASE_URL`, nil when unset or empty (then `serve` starts an embedded PostgreSQL).
    public static func databaseURL(from environment: [String: String]) -> String? {
        environment["DATABASE_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// `SUBSYNC_CATALOGUE`, nil when unset or empty (the built-in catalogue).
    public static func cataloguePath(from environment: [String: String]) -> String? {
        environment["SUBSYNC_CATALOGUE"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// `SUBSYNC_TOKEN_SECRET`, nil when unset; at least 32 bytes.
    public static func tokenSecret(from environment: [String: String]) throws -> String? {
        try secret("SUBSYNC_TOKEN_SECRET", in: environment, bytes: 32)
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
