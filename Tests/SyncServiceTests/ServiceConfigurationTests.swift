import Logging
import SyncService
import Testing

@Suite("Service configuration")
struct ServiceConfigurationTests {
    @Test("defaults when the environment is empty")
    func defaults() throws {
        let configuration = try ServiceConfiguration.fromEnvironment([:])
        #expect(configuration.databaseURL == nil)
        #expect(configuration.host == "127.0.0.1")
        #expect(configuration.port == 8080)
        #expect(configuration.databasePoolSize == max(10, configuration.workers + configuration.deliveryWorkers + 6))
        #expect(configuration.logLevel == .info)
    }

    @Test("reads every variable")
    func readsEnvironment() throws {
        let configuration = try ServiceConfiguration.fromEnvironment([
            "DATABASE_URL": "postgresql://db/x",
            "SUBSYNC_HOST": "0.0.0.0",
            "SUBSYNC_PORT": "9000",
            "SUBSYNC_DATA_DIR": "/var/lib/subsync",
            "SUBSYNC_EMBEDDED_PG_PORT": "6000",
            "SUBSYNC_DB_POOL_SIZE": "20",
            "SUBSYNC_LOG_LEVEL": "DEBUG",
        ])
        #expect(configuration.databaseURL == "postgresql://db/x")
        #expect(configuration.host == "0.0.0.0")
        #expect(configuration.port == 9000)
        #expect(configuration.dataDirectory == "/var/lib/subsync")
        #expect(configuration.embeddedPostgresPort == 6000)
        #expect(configuration.databasePoolSize == 20)
        #expect(configuration.logLevel == .debug)
    }

    @Test("bad values name the variable", arguments: [
        ("SUBSYNC_PORT", "http"),
        ("SUBSYNC_PORT", "70000"),
        ("SUBSYNC_EMBEDDED_PG_PORT", "-1"),
        ("SUBSYNC_DB_POOL_SIZE", "0"),
        ("SUBSYNC_LOG_LEVEL", "loud"),
        // AdMob's keys decide whose rewards are genuine: never fetched in clear from elsewhere.
        ("SUBSYNC_ADMOB_KEYS_URL", "http://www.gstatic.com/admob/reward/verifier-keys.json"),
        ("SUBSYNC_ADMOB_KEYS_URL", "http://127.0.0.1.example.com/keys.json"),
        ("SUBSYNC_APPSTORE_BACKFILL_INTERVAL", "5"),
        ("SUBSYNC_TOKEN_MAX_LIFETIME", "10"),
        ("SUBSYNC_TOKEN_MAX_LIFETIME", "forever"),
    ])
    func rejectsBadValues(variable: String, value: String) throws {
        let error = try #require(throws: ConfigurationError.self) {
            try ServiceConfiguration.fromEnvironment([variable: value])
        }
        #expect(error.variable == variable)
        #expect(error.description.contains(value))
    }

    @Test("AdMob's keys URL: https, or http to a loopback address")
    func adMobKeysURL() throws {
        for url in ["https://www.gstatic.com/admob/reward/verifier-keys.json", "http://127.0.0.1:8080/keys.json", "http://localhost/keys.json"] {
            #expect(try ServiceConfiguration.fromEnvironment(["SUBSYNC_ADMOB_KEYS_URL": url]).adMobKeysURL == url)
        }
    }
}
