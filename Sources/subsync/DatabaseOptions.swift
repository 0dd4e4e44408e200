import ArgumentParser
import Foundation
import Logging
import Postgres
import SyncService

/// `--database-url`, shared by every command that talks to the database.
struct DatabaseOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("PostgreSQL URL (postgresql://user@host:port/db). Defaults to $DATABASE_URL.", valueName: "url"))
    var databaseURL: String?

    /// The URL from the flag or the environment, or nil when neither is set.
    var resolvedURL: String? {
        if let databaseURL, !databaseURL.isEmpty { return databaseURL }
        return ServiceConfiguration.databaseURL(from: ProcessInfo.processInfo.environment)
    }

    /// A pool on the configured database; exits with a usage error when none is configured.
    func makePool(size: Int = 4, logger: Logger) throws -> ConnectionPool {
        guard let url = resolvedURL else {
            printError("no database configured: pass --database-url or set DATABASE_URL")
            throw ExitCodes.usage
        }
        let configuration: ConnectionConfiguration
        do {
            configuration = try ConnectionConfiguration(url: url)
        } catch {
            printError("\(error)")
            throw ExitCodes.usage
        }
        return ConnectionPool(configuration: .init(connection: configuration, maximumConnections: size), logger: logger)
    }
}

/// Writes a message to standard error with the program's name.
func printError(_ message: String) {
    FileHandle.standardError.write(Data("subsync: \(message)\n".utf8))
}

/// Maps a database failure to the documented exit code, after saying what happened.
func failureExitCode(for error: any Error) -> ExitCode {
    printError("\(error)")
    if let error = error as? PostgresError, error.kind == .connectionFailed || error.kind == .connectionLost {
        return ExitCodes.unavailable
    }
    return ExitCodes.failure
}
