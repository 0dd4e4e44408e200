import ArgumentParser
import Dispatch
import Foundation
import Logging
import Metrics
import Postgres
import Prometheus
import ServiceLifecycle
import SyncCore
import SyncService
import SyncStore

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the sync service (HTTP API and background workers).",
        discussion: """
            With a database URL (flag or DATABASE_URL) it uses that database. Without one it \
            starts an embedded PostgreSQL in the data folder (initdb and pg_ctl from the system's \
            PostgreSQL), so one command runs everything on a fresh machine. Pending migrations \
            are applied at start. SIGTERM or SIGINT stops it gracefully.

            Examples:
              subsync serve
              subsync serve --port 9000 --database-url postgresql://subsync@db/subsync
            """
    )

    @OptionGroup var database: DatabaseOptions

    @Option(help: "Address to bind (default $SUBSYNC_HOST or 127.0.0.1).")
    var host: String?

    @Option(help: "HTTP port (default $SUBSYNC_PORT or 8080).")
    var port: Int?

    @Option(help: "Folder for the embedded PostgreSQL (default $SUBSYNC_DATA_DIR or .subsync).")
    var dataDir: String?

    @Flag(help: "Do not apply pending migrations at start.")
    var noMigrate = false

    @Option(help: "Resolution workers in this process (default $SUBSYNC_WORKERS or 2 per core; 0 for API only).")
    var workers: Int?

    func run() async throws {
        var configuration: ServiceConfiguration
        do {
            configuration = try ServiceConfiguration.fromEnvironment()
        } catch {
            printError("\(error)")
            throw ExitCodes.usage
        }
        if let url = database.resolvedURL { configuration.databaseURL = url }
        if let host { configuration.host = host }
        if let port {
            guard (0...65_535).contains(port) else {
                printError("--port must be from 0 to 65535")
                throw ExitCodes.usage
            }
            configuration.port = port
        }
        if let dataDir { configuration.dataDirectory = dataDir }
        if let workers {
            guard (0...64).contains(workers) else {
                printError("--workers must be from 0 to 64")
                throw ExitCodes.usage
            }
            configuration.workers = workers
            if ProcessInfo.processInfo.environment["SUBSYNC_DB_POOL_SIZE"] == nil {
                configuration.databasePoolSize = configuration.recommendedPoolSize
            }
        }
        let catalogue = try loadCatalogue(path: configuration.cataloguePath)

        let level = configuration.logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "subsync")
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let verifier = try storeKitVerifier(configuration, logger: logger)
        let appStoreConfiguration = try appStoreServerAPI(configuration, logger: logger)
        if appStoreConfiguration != nil, verifier == nil {
            printError(
                "SUBSYNC_APPSTORE_KEY_FILE is set, but the store's answers are verified like device reports: set SUBSYNC_APPLE_ROOT_CERTIFICATES and SUBSYNC_BUNDLE_ID")
            throw ExitCodes.usage
        }
        var adMobKeys: AdMobKeys?
        if configuration.adMobKeysFile != nil || configuration.adMobKeysURL != nil {
            guard !configuration.adMobAdUnits.isEmpty else {
                printError("SUBSYNC_ADMOB_AD_UNITS must list the app's rewarded ad unit ids: AdMob signs every publisher's callbacks with the same keys")
                throw ExitCodes.usage
            }
            guard !configuration.adMobRewardTokens || configuration.tokenSecret != nil else {
                printError("rewarded ads bind each reward to its account with a reward token signed under SUBSYNC_TOKEN_SECRET: set it, or SUBSYNC_ADMOB_REWARD_TOKENS=off (then a modified app can credit any account)")
                throw ExitCodes.usage
            }
            let keys = AdMobKeys(source: .init(file: configuration.adMobKeysFile, url: configuration.adMobKeysURL), clock: SystemClock(), logger: logger)
            do {
                try await keys.load()
            } catch {
                printError("\(error)")
                throw ExitCodes.usage
            }
            if await keys.count == 0 { logger.warning("no AdMob key could be loaded yet: rewarded-ad callbacks are refused until one is") }
            adMobKeys = keys
        }
        if configuration.databaseURL != nil, !configuration.secretSealer.isSealing {
            logger.warning("SUBSYNC_SECRET_KEYS is not set: webhook signing secrets are stored in clear")
        }

        var services: [any Service] = []
        var connection: ConnectionConfiguration
        if let url = configuration.databaseURL {
            do {
                connection = try ConnectionConfiguration(url: url)
            } catch {
                printError("\(error)")
                throw ExitCodes.usage
            }
        } else {
            let embedded = try await startEmbedded(&configuration, logger: logger)
            connection = embedded.server.connectionConfiguration
            services.append(embedded.service)
        }
        if configuration.adminKey == nil && configuration.adminKeys.isEmpty {
            logger.warning("neither SUBSYNC_ADMIN_KEY nor SUBSYNC_ADMIN_KEYS is set: admin access is disabled")
        } else if !configuration.adminKeys.isEmpty {
            // The names only: who may act, never a key.
            logger.notice("named admin keys", metadata: ["names": "\(configuration.adminKeys.keys.sorted().joined(separator: ", "))"])
        }
        if configuration.tokenSecret == nil {
            logger.warning("SUBSYNC_TOKEN_SECRET is not set: device tokens are refused")
        }

        connection.answerTimeout = configuration.databaseAnswerTimeout
        let pool = ConnectionPool(
            configuration: .init(connection: connection, maximumConnections: configuration.databasePoolSize),
            logger: logger
        )
        // The connections the workers, the delivery loops and the sweeper take first open while
        // the migration runs, not one after another as each asks.
        async let prewarmed: Void = pool.prewarm(configuration.workers + configuration.deliveryWorkers + 1)
        // Every index of the per-account tables compares text ids; under a locale's collation
        // each comparison goes through the locale (docs/PERFORMANCE.md, *In the code*). Asked
        // beside the migration, so that the start waits for nothing more.
        async let collation = DatabaseCollation.nonBytewise(pool)
        if !noMigrate {
            do {
                try await Migrator(logger: logger).migrate(pool: pool)
            } catch let error as MigrationError {
                printError(error.description)
                throw ExitCodes.dataError
            } catch {
                throw failureExitCode(for: error)
            }
        }

        await prewarmed
        if let slowCollation = try? await collation {
            logger.notice(
                "the database compares text with the collation '\(slowCollation)': subsync runs faster in a database created with LC_COLLATE 'C' (docs/CONFIGURATION.md, Creating the database)")
        }
        let authenticator = await Authenticator(
            adminKey: configuration.adminKey, adminKeys: configuration.adminKeys, tokenSecret: configuration.tokenSecret,
            previousTokenSecrets: configuration.previousTokenSecret.map { [$0] } ?? [], maximumLifetime: configuration.tokenMaximumLifetime)
        let dependencies = ServiceDependencies(
            pool: pool,
            catalogue: catalogue,
            authenticator: authenticator,
            metricsRegistry: registry,
            storeKitVerifier: verifier,
            adMobKeys: adMobKeys,
            // Apple's limits are per app: every process of it shares one schedule (docs/STORE.md).
            appStoreAPI: appStoreConfiguration.map { AppStoreServerAPI(configuration: $0, sharedBudget: RateBuckets(pool: pool), logger: logger) }
        )
        let app = buildApplication(configuration: configuration, dependencies: dependencies, logger: logger)
        // Services stop in reverse order: the HTTP server and workers first, the embedded
        // database last.
        let group = ServiceGroup(
            configuration: .init(
                services: services + [app],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
        )
        do {
            try await group.run()
        } catch let error as EmbeddedPostgresService.Failure {
            printError("\(error); exiting so that a supervisor can start serve again")
            throw ExitCodes.unavailable
        }
    }
}

/// The catalogue from `path`, or the built-in default; a bad file is a usage error naming the
/// bad entry.
func loadCatalogue(path: String?) throws -> Catalogue {
    guard let path else { return Catalogue.default }
    do {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        return try Catalogue(jsonData: data)
    } catch let error as CatalogueError {
        printError("catalogue \(path): \(error)")
        throw ExitCodes.usage
    } catch {
        printError("cannot read the catalogue \(path): \(error.localizedDescription)")
        throw ExitCodes.usage
    }
}

extension Serve {
    /// The App Store Server API configuration (its key read and parsed now), said out loud once:
    /// on, with its environment and key id, or off. The client is made once the pool is.
    /// - Throws: ``ExitCodes/usage`` when a setting or the key cannot be used.
    func appStoreServerAPI(_ configuration: ServiceConfiguration, logger: Logger) throws -> AppStoreAPIConfiguration? {
        guard let settings = configuration.appStoreAPI else {
            logger.notice("App Store Server API off (no SUBSYNC_APPSTORE_KEY_FILE): the store is never asked (docs/STORE.md)")
            return nil
        }
        let apiConfiguration: AppStoreAPIConfiguration
        do {
            apiConfiguration = try settings.configuration(bundleID: configuration.bundleID)
        } catch {
            printError("\(error)")
            throw ExitCodes.usage
        }
        logger.notice("App Store Server API on", metadata: [
            "environment": "\(apiConfiguration.environment.rawValue)", "key_id": "\(apiConfiguration.keyID)",
            "base_url": "\(apiConfiguration.baseURL)",
        ])
        return apiConfiguration
    }

    /// The StoreKit verifier of the configuration, and the signature policy said out loud.
    /// - Throws: ``ExitCodes/usage`` when signatures are required but cannot be verified, or a
    ///   root certificate cannot be read.
    func storeKitVerifier(_ configuration: ServiceConfiguration, logger: Logger) throws -> StoreKitVerifier? {
        var verifier: StoreKitVerifier?
        if let bundleID = configuration.bundleID, !configuration.appleRootCertificatePaths.isEmpty {
            do {
                verifier = try StoreKitVerifier(
                    rootCertificatePaths: configuration.appleRootCertificatePaths, bundleID: bundleID,
                    allowedEnvironments: configuration.storeEnvironments, appAppleID: configuration.appAppleID)
            } catch {
                printError("SUBSYNC_APPLE_ROOT_CERTIFICATES: \(error)")
                throw ExitCodes.usage
            }
            logger.notice("StoreKit verification on", metadata: [
                "bundle_id": "\(bundleID)",
                "environments": "\(configuration.storeEnvironments.map(\.rawValue).sorted().joined(separator: ","))",
                "roots": "\(configuration.appleRootCertificatePaths.count)",
            ])
        } else if configuration.bundleID != nil || !configuration.appleRootCertificatePaths.isEmpty {
            printError("StoreKit verification needs both SUBSYNC_APPLE_ROOT_CERTIFICATES and SUBSYNC_BUNDLE_ID")
            throw ExitCodes.usage
        }
        if configuration.requiresSignedReports {
            guard verifier != nil else {
                printError(
                    """
                    SUBSYNC_REQUIRE_SIGNED is on (the default with a DATABASE_URL), but StoreKit verification is not \
                    configured: set SUBSYNC_APPLE_ROOT_CERTIFICATES (e.g. AppleRootCA-G3.cer) and SUBSYNC_BUNDLE_ID, \
                    or SUBSYNC_REQUIRE_SIGNED=false for development
                    """)
                throw ExitCodes.usage
            }
        } else {
            let why = configuration.requireSigned == false ? "SUBSYNC_REQUIRE_SIGNED=false" : "embedded development mode (no DATABASE_URL)"
            for line in [
                "**************************************************************************************",
                "SIGNATURES ARE NOT REQUIRED (\(why)): unsigned device reports are trusted as sent,",
                "so any device can grant itself any subscription. Never run production like this.",
                "**************************************************************************************",
            ] {
                logger.warning("\(line)")
            }
        }
        return verifier
    }
}
