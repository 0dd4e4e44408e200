import Curl
import Foundation
import Logging
import Postgres
import ServiceLifecycle
import SyncService
import SyncStore

extension Serve {
    /// The embedded development mode (no `DATABASE_URL`): claims the data folder's PostgreSQL
    /// for this process (refusing when another live process owns it), starts it, fills in the
    /// development credentials that are not configured, and prints the start banner.
    func startEmbedded(
        _ configuration: inout ServiceConfiguration, logger: Logger
    ) async throws -> (server: LocalServer, service: EmbeddedPostgresService) {
        let dataDirectory = URL(fileURLWithPath: configuration.dataDirectory)
        let directory = dataDirectory.appendingPathComponent("postgres")
        logger.notice(
            "no DATABASE_URL: starting an embedded PostgreSQL",
            metadata: ["data": "\(directory.path)", "port": "\(configuration.embeddedPostgresPort)"]
        )
        let server: LocalServer
        let ownership: LocalServer.Ownership
        do {
            server = try LocalServer(dataDirectory: directory, port: configuration.embeddedPostgresPort, logger: logger)
            ownership = try server.claimOwnership()
        } catch let error as LocalServer.ServerError {
            printError("\(error)")
            throw ExitCodes.unavailable
        } catch {
            printError("could not claim the embedded PostgreSQL in \(directory.path): \(error)")
            throw ExitCodes.unavailable
        }
        do {
            try await runBlocking { try server.start() }
        } catch {
            printError("could not start the embedded PostgreSQL: \(error)")
            throw ExitCodes.unavailable
        }
        logger.notice("embedded PostgreSQL ready", metadata: ["url": "\(server.url)"])

        let credentials = DevelopmentCredentials(dataDirectory: dataDirectory)
        var made: [(name: String, value: String, file: URL)] = []
        do {
            if !configuration.secretSealer.isSealing {
                // A key of its own for webhook secrets at rest, kept beside the database it protects.
                configuration.secretSealer = try SecretSealer(keys: [try credentials.secretKey()])
            }
            if configuration.adminKey == nil && configuration.adminKeys.isEmpty {
                let key = try credentials.adminKey()
                configuration.adminKey = key.value
                made.append(("admin key", key.value, key.file))
            }
            if configuration.tokenSecret == nil {
                let secret = try credentials.tokenSecret()
                configuration.tokenSecret = secret.value
                made.append(("token secret", secret.value, secret.file))
            }
            try (server.url + "\n").write(to: dataDirectory.appendingPathComponent("database-url"), atomically: true, encoding: .utf8)
        } catch {
            printError("could not read or create the development credentials in \(dataDirectory.path): \(error)")
            throw ExitCodes.unavailable
        }
        if !configuration.webhookAddressGuardIsSet {
            // Development receivers run on this machine.
            configuration.webhookAddressGuard = (try? AddressGuard(allowList: "127.0.0.0/8, ::1/128")) ?? .publicOnly
        }
        FileHandle.standardError.write(Data(developmentBanner(configuration, server: server, made: made).utf8))
        return (server, EmbeddedPostgresService(server: server, ownership: ownership, logger: logger))
    }

    /// What a developer needs to make the first request, printed once at start to standard error
    /// (never through the logger, so no log level or log shipper repeats the credentials).
    func developmentBanner(
        _ configuration: ServiceConfiguration, server: LocalServer, made: [(name: String, value: String, file: URL)]
    ) -> String {
        let host = ["0.0.0.0", "::", ""].contains(configuration.host) ? "127.0.0.1" : configuration.host
        let base = "http://\(host.contains(":") ? "[\(host)]" : host):\(configuration.port)"
        let now = Date()
        let formatter = ISO8601DateFormatter()
        let purchased = formatter.string(from: now)
        let expires = formatter.string(from: now.addingTimeInterval(30 * 86_400))
        let rule = String(repeating: "=", count: 100)
        var lines = [
            rule,
            "subsync development mode: embedded PostgreSQL in \(server.dataDirectory.path), signed reports not required.",
        ]
        if made.isEmpty {
            lines.append("Credentials: SUBSYNC_ADMIN_KEY and SUBSYNC_TOKEN_SECRET are your own (not printed).")
        } else {
            lines.append("Development credentials (made once for this data folder, kept in mode 0600 files; never used with a DATABASE_URL):")
            for item in made {
                lines.append("  \(item.name.padding(toLength: 13, withPad: " ", startingAt: 0)) \(item.value)    (\(item.file.path))")
            }
        }
        let adminKey = made.first(where: { $0.name == "admin key" }).map { "SUBSYNC_ADMIN_KEY=\($0.value)" } ?? "SUBSYNC_ADMIN_KEY  # yours"
        lines += [
            "First requests, ready to paste: a device reports a purchase and waits for the state it makes, then a read.",
            "  export SUBSYNC_URL=\(base) \(adminKey)",
            "  curl -s -w '\\n' -X POST \"$SUBSYNC_URL/v1/accounts/demo-user/sync?wait_ms=5000\" -H \"Authorization: Bearer $SUBSYNC_ADMIN_KEY\" \\",
            "    -H 'Content-Type: application/json' -d '{\"device\": {\"id\": \"demo-phone\", \"platform\": \"ios\", \"app_version\": \"1.0\"},",
            "    \"reports\": [{\"report_id\": \"demo-1\", \"observed_at\": \"\(purchased)\", \"product_id\": \"voip.premium.monthly\",",
            "    \"original_transaction_id\": \"1000\", \"transaction_id\": \"1000\", \"purchased_at\": \"\(purchased)\", \"expires_at\": \"\(expires)\"}]}'",
            "  curl -s -w '\\n' \"$SUBSYNC_URL/v1/accounts/demo-user\" -H \"Authorization: Bearer $SUBSYNC_ADMIN_KEY\"",
            "Command line: export DATABASE_URL=\"\(server.url)\"  (also in \(server.dataDirectory.deletingLastPathComponent().appendingPathComponent("database-url").path))",
            "  subsync accounts show demo-user",
            rule,
        ]
        return lines.joined(separator: "\n") + "\n"
    }
}
