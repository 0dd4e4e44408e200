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
        var configuration = try readConfiguration()
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
        let verifier: StoreKitVerifier?
        let appStoreConfiguration: AppStoreAPIConfiguration?
        let adMobKeys: AdMobKeys?
        do {
            verifier = try configuration.makeStoreKitVerifier(logger: logger)
            appStoreConfiguration = try configuration.makeAppStoreAPIConfiguration(logger: logger)
            adMobKeys = try await configuration.loadAdMobKeys(clock: SystemClock(), logger: logger)
            // What buildApplication checks, checked before an embedded PostgreSQL starts.
            try configuration.check(
                .init(storeKitVerification: verifier != nil, appStoreAPI: appStoreConfiguration != nil, adMobKeys: adMobKeys != nil))
        } catch {
            printError("\(error)")
            throw ExitCodes.usage
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
        let app: any Service
        do {
            app = try buildApplication(configuration: configuration, dependencies: dependencies, logger: logger)
        } catch {
            printError("\(error)")
            throw ExitCodes.usage
        }
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
    /// The settings of the environment, with this command's flags over them, checked as a whole
    /// (docs/CONFIGURATION.md): a bad value is a usage error naming its variable or flag.
    func readConfiguration() throws -> ServiceConfiguration {
        do {
            var configuration = try ServiceConfiguration.fromEnvironment()
            if let url = database.resolvedURL { configuration.databaseURL = url }
            if let host { configuration.host = host }
            if let port {
                guard (0...65_535).contains(port) else { throw ConfigurationError(variable: "--port", message: "must be from 0 to 65535") }
                configuration.port = port
            }
            if let dataDir { configuration.dataDirectory = dataDir }
            if let workers {
                guard (0...64).contains(workers) else { throw ConfigurationError(variable: "--workers", message: "must be from 0 to 64") }
                configuration.setWorkers(workers)
            }
            try configuration.validate()
            return configuration
        } catch {
            printError("\(error)")
            throw ExitCodes.usage
        }
    }
}
