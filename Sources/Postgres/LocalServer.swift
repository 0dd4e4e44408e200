import Foundation
import Logging

/// A PostgreSQL server of our own, in a local data folder, run with the system's `initdb`
/// and `pg_ctl`.
///
/// This is what makes `subsync serve` work on a fresh machine with no database configured,
/// and what tests use when they need to stop and restart a server.
///
/// It listens on a Unix socket inside its data folder and nowhere else: no TCP listener. The
/// data folder is mode 0700 (initdb's), so only the server's OS user (and root) can reach the
/// socket, and local connections there are trusted; TCP connections are rejected by its
/// `pg_hba.conf` even if someone turns a listener on. Another local user cannot connect.
///
/// PostgreSQL refuses to run as root. When this process is root, every server command runs
/// as an unprivileged system user (`postgres`, which Debian's package creates, or the
/// `SUBSYNC_POSTGRES_OS_USER` override) through `runuser`, and the data folder is given to it.
public struct LocalServer: Sendable {
    public enum ServerError: Error, CustomStringConvertible {
        case binariesNotFound(searched: [String])
        case commandFailed(command: String, status: Int32, output: String)
        case noUnprivilegedUser(String)
        case notReachable(String)
        /// The server's data folder is claimed by another live process (see ``LocalServer/claimOwnership()``).
        case ownedByAnotherProcess(pid: Int32?, dataDirectory: String)

        public var description: String {
            switch self {
            case .binariesNotFound(let searched):
                "PostgreSQL server programs (initdb, pg_ctl) not found; looked in \(searched.joined(separator: ", ")). Install the 'postgresql' package or set SUBSYNC_POSTGRES_BIN."
            case .commandFailed(let command, let status, let output):
                "\(command) failed with status \(status): \(output)"
            case .noUnprivilegedUser(let message):
                message
            case .notReachable(let message):
                message
            case .ownedByAnotherProcess(let pid, let dataDirectory):
                "the embedded PostgreSQL in \(dataDirectory) belongs to \(pid.map { "process \($0)" } ?? "another process"), which is still running (perhaps still shutting down): stop it first, or give this one its own data folder (--data-dir or SUBSYNC_DATA_DIR)"
            }
        }
    }

    /// The data folder (created by `initdb` on first start).
    public let dataDirectory: URL
    /// The port number, which names the Unix socket (`.s.PGSQL.<port>`); there is no TCP
    /// listener.
    public let port: Int
    /// The database created for the service.
    public let databaseName: String
    let binDirectory: URL
    let runAsUser: String?
    let logger: Logger

    /// Finds the server programs and decides which OS user runs them.
    public init(
        dataDirectory: URL,
        port: Int,
        databaseName: String = "subsync",
        logger: Logger = Logger(label: "subsync.postgres.local")
    ) throws {
        self.dataDirectory = dataDirectory.standardizedFileURL
        self.port = port
        self.databaseName = databaseName
        self.logger = logger
        self.binDirectory = try Self.findBinaries()
        if geteuid() == 0 {
            let user = ProcessInfo.processInfo.environment["SUBSYNC_POSTGRES_OS_USER"] ?? "postgres"
            guard getpwnam(user) != nil else {
                throw ServerError.noUnprivilegedUser(
                    "running as root, and PostgreSQL refuses root: create the system user '\(user)' (the 'postgresql' package does) or set SUBSYNC_POSTGRES_OS_USER"
                )
            }
            self.runAsUser = user
        } else {
            self.runAsUser = nil
        }
    }

    /// The socket folder, inside the data folder so nothing else is shared.
    public var socketDirectory: URL { dataDirectory.appendingPathComponent("socket") }

    /// A connection configuration for the service's database over the Unix socket.
    public var connectionConfiguration: ConnectionConfiguration {
        ConnectionConfiguration([
            ("host", socketDirectory.path),
            ("port", String(port)),
            ("user", "subsync"),
            ("dbname", databaseName),
        ])
    }

    /// A URL for the same database over the socket, for tools such as psql and pgbench run
    /// by the server's OS user or root.
    public var url: String {
        let host = socketDirectory.path.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? socketDirectory.path
        return "postgresql://subsync@/\(databaseName)?host=\(host)&port=\(port)"
    }

    /// Whether `initdb` has run in the data folder.
    public var isInitialized: Bool {
        FileManager.default.fileExists(atPath: dataDirectory.appendingPathComponent("PG_VERSION").path)
    }

    /// Creates the cluster if needed, starts the server, and creates the database.
    public func start() throws {
        let fileManager = FileManager.default
        try fileManager.createDirectory(at: dataDirectory, withIntermediateDirectories: true)
        if !isInitialized {
            try giveToServerUser(dataDirectory)
            logger.info("initializing a local PostgreSQL cluster", metadata: ["data": "\(dataDirectory.path)"])
            try run(
                "initdb",
                ["-D", dataDirectory.path, "-U", "subsync", "--auth-local=trust", "--auth-host=reject", "-E", "UTF8", "--locale=C.UTF-8", "--lc-collate=C", "--no-sync"]
            )
        }
        try fileManager.createDirectory(at: socketDirectory, withIntermediateDirectories: true)
        try giveToServerUser(socketDirectory)
        if !isRunning {
            // Only our own socket, in the 0700 data folder: trust auth is safe because no one
            // else can reach it. (Clusters initialized by earlier versions trust TCP as well;
            // with no listener, that rule is never reached.)
            let options = "-c listen_addresses='' -p \(port) -k \(socketDirectory.path) -c max_connections=200 -c fsync=on"
            try run(
                "pg_ctl",
                ["-D", dataDirectory.path, "-l", dataDirectory.appendingPathComponent("server.log").path, "-o", options, "-w", "-t", "60", "start"]
            )
        }
        try createDatabaseIfNeeded()
    }

    /// Stops the server (`fast`: disconnects clients, rolls back open transactions).
    public func stop(mode: String = "fast") throws {
        guard isRunning else { return }
        try run("pg_ctl", ["-D", dataDirectory.path, "-m", mode, "-w", "-t", "60", "stop"])
    }

    /// Stops and starts the server again, as a database failover or restart would.
    public func restart() throws {
        try stop()
        try start()
    }

    /// Whether a server is running on the data folder.
    public var isRunning: Bool {
        guard isInitialized else { return false }
        return (try? run("pg_ctl", ["-D", dataDirectory.path, "status"], quiet: true)) != nil
    }

    private func createDatabaseIfNeeded() throws {
        let psql = binDirectory.appendingPathComponent("psql")
        let psqlPath = FileManager.default.isExecutableFile(atPath: psql.path) ? psql.path : "/usr/bin/psql"
        let exists = try Self.execute(
            psqlPath,
            ["-h", socketDirectory.path, "-p", String(port), "-U", "subsync", "-d", "postgres", "-tAc",
             "SELECT 1 FROM pg_database WHERE datname = '\(databaseName.replacingOccurrences(of: "'", with: "''"))'"]
        )
        if exists.trimmingCharacters(in: .whitespacesAndNewlines) != "1" {
            let createdb = binDirectory.appendingPathComponent("createdb")
            let createdbPath = FileManager.default.isExecutableFile(atPath: createdb.path) ? createdb.path : "/usr/bin/createdb"
            _ = try Self.execute(createdbPath, ["-h", socketDirectory.path, "-p", String(port), "-U", "subsync", databaseName])
        }
    }

    private func giveToServerUser(_ directory: URL) throws {
        guard let runAsUser else { return }
        _ = try Self.execute("/bin/chown", ["-R", "\(runAsUser):", directory.path])
        _ = try Self.execute("/bin/chmod", ["700", directory.path])
        // The server user must be able to reach the folder through every parent.
        do {
            _ = try Self.execute("/usr/sbin/runuser", ["-u", runAsUser, "--", "test", "-w", directory.path])
        } catch {
            throw ServerError.noUnprivilegedUser(
                "the PostgreSQL user '\(runAsUser)' cannot reach \(directory.path) (a parent folder is private); choose a data folder elsewhere, e.g. SUBSYNC_DATA_DIR=/var/lib/subsync"
            )
        }
    }

    @discardableResult
    private func run(_ program: String, _ arguments: [String], quiet: Bool = false) throws -> String {
        let path = binDirectory.appendingPathComponent(program).path
        if let runAsUser {
            return try Self.execute("/usr/sbin/runuser", ["-u", runAsUser, "--", path] + arguments)
        }
        return try Self.execute(path, arguments)
    }

    /// Runs a program to completion and returns its output; throws with the output on failure.
    static func execute(_ path: String, _ arguments: [String]) throws -> String {
        let (exitStatus, text) = try spawnAndWait(path, arguments)
        guard exitStatus == 0 else {
            throw ServerError.commandFailed(
                command: URL(fileURLWithPath: path).lastPathComponent + " " + arguments.prefix(4).joined(separator: " "),
                status: exitStatus,
                output: String(text.suffix(2000))
            )
        }
        return text
    }

    /// Runs a program to completion and returns its exit status and output (stdout and stderr
    /// together); throws only when it cannot be started.
    ///
    /// Uses `posix_spawn` and `waitpid` rather than Foundation's `Process`: `pg_ctl start` leaves
    /// a server running in the background, and waiting on it through `Process` was seen to hang.
    /// Output goes to a temporary file, so no pipe can be held open by the server.
    public static func spawnAndWait(_ path: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent("subsync-cmd-\(UUID().uuidString).log").path
        defer { unlink(outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, path, &actions, nil, argv, environ)
        guard spawned == 0 else {
            throw ServerError.commandFailed(command: path, status: spawned, output: String(cString: strerror(spawned)))
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        // WIFEXITED / WEXITSTATUS are macros that Swift cannot import.
        let exitedNormally = (status & 0x7f) == 0
        return (exitedNormally ? (status >> 8) & 0xff : 128 + (status & 0x7f), text)
    }

    static func findBinaries() throws -> URL {
        var candidates: [String] = []
        if let configured = ProcessInfo.processInfo.environment["SUBSYNC_POSTGRES_BIN"] {
            candidates.append(configured)
        }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        for version in versions.sorted(by: { (Int($0) ?? 0) > (Int($1) ?? 0) }) {
            candidates.append("/usr/lib/postgresql/\(version)/bin")
        }
        candidates += ["/usr/local/pgsql/bin", "/usr/local/bin", "/usr/bin"]
        for candidate in candidates {
            let initdb = URL(fileURLWithPath: candidate).appendingPathComponent("initdb")
            if FileManager.default.isExecutableFile(atPath: initdb.path) {
                return URL(fileURLWithPath: candidate)
            }
        }
        throw ServerError.binariesNotFound(searched: candidates)
    }

    /// A TCP port on 127.0.0.1 that was free a moment ago.
    public static func freePort() -> Int {
        let socketFD = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socketFD >= 0 else { return 54_329 }
        defer { close(socketFD) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socketFD, $0, length) == 0 && getsockname(socketFD, $0, &length) == 0 }
        }
        guard bound else { return 54_329 }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
