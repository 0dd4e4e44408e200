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
    ])
    func rejectsBadValues(variable: String, value: String) throws {
        let error = try #require(throws: ConfigurationError.self) {
            try ServiceConfiguration.fromEnvironment([variable: value])
        }
        #expect(error.variable == variable)
        #expect(error.description.contains(value))
    }
}
