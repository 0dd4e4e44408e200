import Foundation
import Logging
import SyncService
import Testing
import TestSupport

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
            "SUBSYNC_CITUS_ROUTING": "coordinator",
            "SUBSYNC_LOG_LEVEL": "DEBUG",
        ])
        #expect(configuration.databaseURL == "postgresql://db/x")
        #expect(configuration.host == "0.0.0.0")
        #expect(configuration.port == 9000)
        #expect(configuration.dataDirectory == "/var/lib/subsync")
        #expect(configuration.embeddedPostgresPort == 6000)
        #expect(configuration.databasePoolSize == 20)
        #expect(!configuration.citusRoutesToNodes)
        #expect(try ServiceConfiguration.fromEnvironment([:]).citusRoutesToNodes)
        #expect(configuration.logLevel == .debug)
    }

    @Test("bad values name the variable", arguments: [
        ("SUBSYNC_PORT", "http"),
        ("SUBSYNC_PORT", "70000"),
        ("SUBSYNC_EMBEDDED_PG_PORT", "-1"),
        ("SUBSYNC_DB_POOL_SIZE", "0"),
        ("SUBSYNC_CITUS_ROUTING", "workers"),
        ("SUBSYNC_LOG_LEVEL", "loud"),
        // AdMob's keys decide whose rewards are genuine: never fetched in clear from elsewhere.
        ("SUBSYNC_ADMOB_KEYS_URL", "http://www.gstatic.com/admob/reward/verifier-keys.json"),
        ("SUBSYNC_ADMOB_KEYS_URL", "http://127.0.0.1.example.com/keys.json"),
        ("SUBSYNC_APPSTORE_BACKFILL_INTERVAL", "5"),
        ("SUBSYNC_TOKEN_MAX_LIFETIME", "10"),
        ("SUBSYNC_TOKEN_MAX_LIFETIME", "forever"),
        ("SUBSYNC_ADMOB_REWARD_TOKENS", "sometimes"),
    ])
    func rejectsBadValues(variable: String, value: String) throws {
        let error = try #require(throws: ConfigurationError.self) {
            try ServiceConfiguration.fromEnvironment([variable: value])
        }
        #expect(error.variable == variable)
        #expect(error.description.contains(value))
    }

    @Test("named admin keys from SUBSYNC_ADMIN_KEYS and a file; a bad entry is refused without echoing a key")
    func namedAdminKeys() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("admin-keys-\(UUID().uuidString)")
        try "# operators\ncarol = carol-key-0123456789abc\n\ndave=dave-key-0123456789abcd\n".write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let configuration = try ServiceConfiguration.fromEnvironment([
            "SUBSYNC_ADMIN_KEYS": "ann=ann-key-0123456789abcdef, backend=backend-key-0123456789",
            "SUBSYNC_ADMIN_KEYS_FILE": file.path, "SUBSYNC_ADMIN_KEY": "shared-key-0123456789",
        ])
        #expect(configuration.adminKeys == [
            "ann": "ann-key-0123456789abcdef", "backend": "backend-key-0123456789", "carol": "carol-key-0123456789abc",
            "dave": "dave-key-0123456789abcd",
        ])
        let refused: [[String: String]] = [
            ["SUBSYNC_ADMIN_KEYS": "forgot-the-name-0123456789"],
            ["SUBSYNC_ADMIN_KEYS": "ann=short"],
            ["SUBSYNC_ADMIN_KEYS": "ann=ann-key-0123456789abcdef,ann=other-key-0123456789"],
            ["SUBSYNC_ADMIN_KEYS": "ann=same-key-0123456789abc,bob=same-key-0123456789abc"],
            ["SUBSYNC_ADMIN_KEYS": "bad name=ann-key-0123456789abcdef"],
            ["SUBSYNC_ADMIN_KEYS": "admin=ann-key-0123456789abcdef", "SUBSYNC_ADMIN_KEY": "shared-key-0123456789"],
            ["SUBSYNC_ADMIN_KEYS": "admin=ann-key-0123456789abcdef"],
            ["SUBSYNC_ADMIN_KEYS_FILE": "/nonexistent/admin-keys"],
        ]
        for environment in refused {
            let error = try #require(throws: ConfigurationError.self) { try ServiceConfiguration.fromEnvironment(environment) }
            #expect(error.variable.hasPrefix("SUBSYNC_ADMIN_KEYS"), "\(environment)")
            #expect(!error.description.contains("0123456789"), "a key was echoed: \(error)")
        }
        // A base64 key pasted without a name splits at its padding: nothing of it is echoed.
        let pasted = try #require(throws: ConfigurationError.self) {
            try ServiceConfiguration.fromEnvironment(["SUBSYNC_ADMIN_KEYS": "QUJDREVGR0hJSktMTU5PUA=="])
        }
        #expect(!pasted.description.contains("QUJDREVG"), "a key was echoed: \(pasted)")
    }

    @Test("AdMob's keys URL: https, or http to a loopback address")
    func adMobKeysURL() throws {
        for url in ["https://www.gstatic.com/admob/reward/verifier-keys.json", "http://127.0.0.1:8080/keys.json", "http://localhost/keys.json"] {
            #expect(try ServiceConfiguration.fromEnvironment(["SUBSYNC_ADMOB_KEYS_URL": url]).adMobKeysURL == url)
        }
    }
}
