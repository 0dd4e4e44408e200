import Curl
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Metrics
import Postgres
import Prometheus
import SyncCore
import SyncService
import SyncStore
import Testing

/// Credentials the test applications accept.
public enum TestCredentials {
    public static let adminKey = "test-admin-key-0123456789"
    public static let tokenSecret = "test-token-secret-0123456789abcdef0123"
}

/// One Prometheus registry for the test process: swift-metrics can be bootstrapped only once.
public enum TestMetrics {
    public static let registry: PrometheusCollectorRegistry = {
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        return registry
    }()
}

/// A fresh database with the schema applied, and what the application needs on it.
/// `seconds` ago, but never before the start of the current calendar month in UTC: usage made
/// "a minute ago" must land in the free tier's current period even when a test runs in the
/// first minute of a month.
public func recentlyThisMonth(_ seconds: TimeInterval, now: Date = Date()) -> Date {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC") ?? .current
    let monthStart = calendar.dateInterval(of: .month, for: now)?.start ?? now
    return max(monthStart, now.addingTimeInterval(-seconds))
}

public struct TestEnvironment: Sendable {
    public let connection: ConnectionConfiguration
    public let pool: ConnectionPool
    public let authenticator: Authenticator
    public let logger: Logger

    public init(connection: ConnectionConfiguration, pool: ConnectionPool, authenticator: Authenticator, logger: Logger) {
        self.connection = connection
        self.pool = pool
        self.authenticator = authenticator
        self.logger = logger
    }

    /// Creates a fresh, migrated database for `body` and drops it afterwards.
    public static func withFresh<T>(poolSize: Int = 8, _ body: (TestEnvironment) async throws -> T) async throws -> T {
        try await TestDatabase.withFreshDatabase { connection in
            // A lease waits as long as a busy core needs: the lease timeout is tested in PoolTests.
            let pool = ConnectionPool(configuration: .init(connection: connection, maximumConnections: poolSize, leaseTimeout: .seconds(600)))
            try await Migrator().migrate(pool: pool)
            let environment = TestEnvironment(
                connection: connection,
                pool: pool,
                authenticator: await Authenticator(adminKey: TestCredentials.adminKey, tokenSecret: TestCredentials.tokenSecret),
                logger: Logger(label: "test")
            )
            do {
                let value = try await body(environment)
                await pool.close()
                return value
            } catch {
                await pool.close()
                throw error
            }
        }
    }

    /// The application as `subsync serve` builds it, on a pool of its own.
    public func application(
        workers: Int = 2,
        batchSize: Int = 100,
        sweepInterval: Duration = .milliseconds(100),
        catalogue: Catalogue = .default,
        deliveryWorkers: Int = 0,
        webhookGuard: AddressGuard? = nil,
        retrySchedule: RetrySchedule = .standard,
        // Long: a receiver that answers must not time out (and be retried) on a busy machine.
        webhookTimeout: Duration = .seconds(30),
        webhookDisableAfter: TimeInterval = 5 * 86_400,
        accountRateLimit: RateLimiter.Limit? = nil,
        deviceRateLimit: RateLimiter.Limit? = nil,
        requireSigned: Bool = false,
        verifier: StoreKitVerifier? = nil,
        binding: BindingPolicy = .reject,
        appAccountTokenKey: String? = nil,
        metricsToken: String? = nil,
        notificationRateLimit: RateLimiter.Limit? = RateLimiter.Limit(ratePerSecond: 20, burst: 200),
        trustedProxies: TrustedProxies = .none,
        reportQuota: RateLimiter.Limit? = nil,
        sharedRateLimits: Bool = true,
        secretSealer: SecretSealer = .none,
        clock: any ServiceClock = SystemClock(),
        authenticator: Authenticator? = nil,
        adMobKeys: AdMobKeys? = nil,
        adMobAdUnits: Set<String> = [],
        // Off by default here: the reward tests of user_id alone predate reward tokens, which
        // their own test turns on (the service's default is on).
        adMobRewardTokens: Bool = false,
        pollInterval: Duration = .milliseconds(200),
        usagePolicy: UsagePolicy = .default,
        appStoreAPI: AppStoreServerAPI? = nil,
        appStoreBackfillInterval: Duration = .seconds(3600),
        port: Int = 0
    ) throws -> some ApplicationProtocol {
        var configuration = ServiceConfiguration(port: port)
        configuration.appStoreBackfillInterval = appStoreBackfillInterval
        configuration.usagePolicy = usagePolicy
        configuration.requireSigned = requireSigned
        configuration.accountBinding = binding
        configuration.adMobAdUnits = adMobAdUnits
        configuration.adMobRewardTokens = adMobRewardTokens
        configuration.tokenSecret = TestCredentials.tokenSecret
        configuration.appAccountTokenKey = appAccountTokenKey
        configuration.metricsToken = metricsToken
        configuration.notificationRateLimit = notificationRateLimit
        configuration.trustedProxies = trustedProxies
        configuration.accountReportQuota = reportQuota
        configuration.sharedRateLimits = sharedRateLimits
        configuration.secretSealer = secretSealer
        configuration.accountRateLimit = accountRateLimit
        configuration.deviceRateLimit = deviceRateLimit
        configuration.deliveryWorkers = deliveryWorkers
        configuration.webhookAddressGuard = webhookGuard ?? .publicOnly
        configuration.webhookRetrySchedule = retrySchedule
        configuration.webhookTimeout = webhookTimeout
        configuration.webhookDisableAfter = webhookDisableAfter
        configuration.workers = workers
        configuration.batchSize = batchSize
        configuration.pollInterval = pollInterval
        configuration.sweepInterval = sweepInterval
        // HummingbirdTesting's live client pipelines every request of a test on one connection;
        // on a busy core the requests queued behind a slow one can wait longer than the 15 s
        // idle timeout, and Hummingbird closes a connection whose next request head it has
        // read but not finished (reset by peer). The timeout itself is tested against a real
        // `serve` (AbandonedBodyTests); here it only needs to stay out of the way.
        configuration.httpIdleTimeout = .seconds(600)
        // Likewise the head and request timeouts (tested against a real `serve`:
        // ServeCommandTests.tricklingConnectionsAreBounded, slowBodiesAndStalledReaders).
        configuration.httpHeadTimeout = .seconds(600)
        configuration.httpRequestTimeout = .seconds(3600)
        // wait_ms may be a minute here: tests that wait for resolution ask for as long as a busy
        // core needs, and still see the answer as soon as the reports are resolved.
        configuration.maximumWaitMilliseconds = 60_000
        // Callers wait up to ten minutes for a connection: tests burst 30+ requests at 8
        // connections, which on a busy core queue longer than the 10 s default (a 503 there is
        // the service shedding load, not what those tests are about; PoolTests test the timeout).
        let appPool = ConnectionPool(configuration: .init(connection: connection, maximumConnections: 8, leaseTimeout: .seconds(600)))
        let dependencies = ServiceDependencies(
            pool: appPool,
            catalogue: catalogue,
            authenticator: authenticator ?? self.authenticator,
            metricsRegistry: TestMetrics.registry,
            clock: clock,
            storeKitVerifier: verifier,
            adMobKeys: adMobKeys,
            appStoreAPI: appStoreAPI
        )
        return try buildApplication(configuration: configuration, dependencies: dependencies, logger: logger)
    }

    public func token(for accountID: String, validFor: TimeInterval = 3600) async throws -> String {
        try await authenticator.mint(accountID: accountID, validFor: validFor)
    }

    /// Counts rows, for "nothing was stored" checks.
    public func count(_ table: String, accountID: String) async throws -> Int {
        let rows = try await pool.query("SELECT count(*) FROM \(unescaped: table) WHERE account_id = \(accountID)")
        return try rows[0].decode(Int.self, at: 0)
    }

    /// The one integer a query answers (a count), for checks on what was stored.
    public func scalar(_ sql: String) async throws -> Int {
        let rows = try await pool.query(PostgresQuery(sql))
        return try rows[0].decode(Int.self, at: 0)
    }
}

/// Builds sync request bodies.
public struct SyncBody: Encodable {
    public struct Device: Encodable {
        public var id: String
        public var platform: String? = "ios"
        public var app_version: String? = "1.0"
    }

    public var device: Device
    public var reports: [Report]

    public init(device: String, reports: [Report]) {
        self.device = Device(id: device)
        self.reports = reports
    }

    public var data: Data {
        get throws { try JSONEncoder.postgres.encode(self) }
    }
}

extension TestClientProtocol {
    /// POSTs a sync and returns the status and JSON body.
    public func sync(
        account: String,
        body: Data,
        credential: String? = TestCredentials.adminKey,
        waitMilliseconds: Int? = 5000
    ) async throws -> (status: HTTPResponse.Status, json: [String: Any]) {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let credential { headers[.authorization] = "Bearer \(credential)" }
        let query = waitMilliseconds.map { "?wait_ms=\($0)" } ?? ""
        var (status, json) = try await execute(
            uri: "/v1/accounts/\(account)/sync\(query)", method: .post, headers: headers, body: ByteBuffer(bytes: body)
        ) { response in
            (response.status, (try? JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]) ?? [:])
        }
        // The server bounds wait_ms (5 s); on a machine too busy to resolve within it, the test
        // waits on for the state after these reports (a condition, up to 300 s; not met, the
        // test fails here). `resolved` stays what the server said, so the read-your-writes test
        // still checks the wait.
        if waitMilliseconds != nil, status == .accepted, json["resolved"] as? Bool == false, let credential {
            let settled = try await waitUntil(seconds: 300) {
                let (readStatus, read) = try await getJSON("/v1/accounts/\(account)", credential: credential)
                guard readStatus == .ok, read["pending_reports"] as? Int == 0 else { return false }
                json["account"] = read
                return true
            }
            try #require(settled, "\(account) still had pending reports 300 s after its sync")
        }
        return (status, json)
    }

    /// GETs a path with a credential and returns the status and JSON body.
    /// POSTs `body` as JSON and returns the status and JSON body.
    public func postJSON(_ uri: String, body: Data, credential: String? = TestCredentials.adminKey) async throws -> (status: HTTPResponse.Status, json: [String: Any]) {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let credential { headers[.authorization] = "Bearer \(credential)" }
        return try await execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(bytes: body)) { response in
            (response.status, (try? JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]) ?? [:])
        }
    }

    public func getJSON(_ uri: String, credential: String? = TestCredentials.adminKey) async throws -> (status: HTTPResponse.Status, json: [String: Any]) {
        var headers: HTTPFields = [:]
        if let credential { headers[.authorization] = "Bearer \(credential)" }
        return try await execute(uri: uri, method: .get, headers: headers) { response in
            (response.status, (try? JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]) ?? [:])
        }
    }
}

extension Dictionary where Key == String, Value == Any {
    /// `json["error"]["code"]`, for error assertions.
    public var errorCode: String? { (self["error"] as? [String: Any])?["code"] as? String }
    public var errorMessage: String? { (self["error"] as? [String: Any])?["message"] as? String }
}
