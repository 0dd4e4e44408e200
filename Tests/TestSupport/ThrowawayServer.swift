import Foundation
import Postgres
#if canImport(Glibc)
import Glibc
#endif

/// The PostgreSQL server a plain `swift test` uses when `DATABASE_URL` is not set: started on
/// first use by `scripts/throwaway-postgres` (the same server `scripts/test` starts: a temporary
/// folder, loopback only, settings for tests), once per test process, and stopped and deleted
/// when the process exits. A test process that is killed leaves its server behind in
/// `/tmp/subsync-pg.*` (stop it with `pg_ctl -D <folder>/data stop`).
enum ThrowawayServer {
    struct Server: Sendable {
        var url: String
        var directory: String
    }

    /// Started once, on first use; every later caller gets the same server (or the same error).
    static let shared: Result<Server, TestSetupError> = {
        let script = TestPackage.file("scripts/throwaway-postgres").path
        // The script registers a trap that stops the server when its shell exits: this shell
        // takes it back, so the server outlives it, and prints what the tests need.
        let command = "source \"$1\" >&2 && trap - EXIT && printf '%s\\n%s\\n' \"$DATABASE_URL\" \"$SUBSYNC_TEST_PG_DIR\""
        let (status, output) = spawnAndWait("/bin/bash", ["-c", command, "throwaway-postgres", script])
        let lines = output.split(separator: "\n").map(String.init)
        guard status == 0, lines.count >= 2,
              let url = lines.dropLast().last, url.hasPrefix("postgresql://"), let directory = lines.last
        else {
            return .failure(TestSetupError(
                "DATABASE_URL is not set and no throwaway PostgreSQL could be started (scripts/throwaway-postgres, status \(status)): \(output.suffix(1500))"))
        }
        atexit { ThrowawayServer.stop() }
        return .success(Server(url: url, directory: directory))
    }()

    /// Stops the server at once and deletes its folder (an `atexit` handler: no Swift
    /// concurrency, no Foundation processes).
    static func stop() {
        guard case .success(let server) = shared else { return }
        let data = server.directory + "/data"
        let bin = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql"))?
            .sorted { (Int($0) ?? 0) > (Int($1) ?? 0) }.first.map { "/usr/lib/postgresql/\($0)/bin/pg_ctl" } ?? "pg_ctl"
        if geteuid() == 0 {
            _ = spawnAndWait("/usr/sbin/runuser", ["-u", "postgres", "--", bin, "-D", data, "-m", "immediate", "-w", "stop"])
        } else {
            _ = spawnAndWait(bin, ["-D", data, "-m", "immediate", "-w", "stop"])
        }
        _ = spawnAndWait("/bin/rm", ["-rf", server.directory])
    }

    /// Runs a program to its end; its status and output (127 when it cannot be started).
    static func spawnAndWait(_ path: String, _ arguments: [String]) -> (Int32, String) {
        do {
            return try LocalServer.spawnAndWait(path, arguments)
        } catch {
            return (127, "\(error)")
        }
    }
}
