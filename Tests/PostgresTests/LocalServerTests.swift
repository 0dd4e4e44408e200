import Foundation
import Postgres
import TestSupport
import Testing

/// The embedded PostgreSQL is reachable by its owner only: no TCP listener, a socket inside a
/// private folder, and no other local user can connect (it would be a superuser).
@Suite struct LocalServerTests {
    /// Runs a program and returns its exit status and output.
    static func run(_ path: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    static func acceptsTCP(port: Int) -> Bool {
        withLoopbackSocket(port: port) { descriptor, address, length in connect(descriptor, address, length) == 0 }
    }

    @Test(.timeLimit(.minutes(15)))
    func onlyItsOwnerCanConnect() async throws {
        let directory = URL(fileURLWithPath: "/tmp").appendingPathComponent("pgt-local-\(UUID().uuidString)")
        let port = LocalServer.freePort()
        let server = try LocalServer(dataDirectory: directory, port: port)
        defer {
            try? server.stop(mode: "immediate")
            try? FileManager.default.removeItem(at: directory)
        }
        try await runBlocking { try server.start() }

        // subsync's own connection, over the socket, works.
        let connection = try await Connection.connect(configuration: server.connectionConfiguration)
        let superuser = try await connection.query("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        #expect(try superuser[0].decode(Bool.self, at: 0), "the service's role is the cluster's owner")
        let listening = try await connection.query("SELECT current_setting('listen_addresses')")
        #expect(try listening[0].decode(String.self, at: 0) == "")
        // Its database compares text bytewise (`C`), with UTF-8 character classes
        // (docs/PERFORMANCE.md, *In the code*).
        let locale = try await connection.query(
            "SELECT datcollate::text, datctype::text FROM pg_database WHERE datname = current_database()")
        #expect(try locale[0].decode(String.self, at: 0) == "C")
        #expect(try locale[0].decode(String.self, at: 1) == "C.UTF-8")
        await connection.close()

        // Nothing listens on the port over TCP.
        #expect(!Self.acceptsTCP(port: port), "the embedded PostgreSQL accepts TCP connections on \(port)")

        // The socket's folder is private to the server's user.
        let attributes = try FileManager.default.attributesOfItem(atPath: directory.path)
        let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
        #expect(mode & 0o077 == 0, "data folder mode \(String(mode, radix: 8))")

        // Another OS user can reach neither the socket nor a TCP listener. (Only root can
        // become another user; every run in CI is root. As another user, the checks above are
        // what keeps others out.)
        if geteuid() == 0 {
            let psql = "/usr/bin/psql"
            for target in [["-h", server.socketDirectory.path], ["-h", "127.0.0.1"]] {
                let attempt = try Self.run(
                    "/usr/sbin/runuser", ["-u", "nobody", "--", psql] + target + ["-p", String(port), "-U", "subsync", "-d", "postgres", "-c", "SELECT 1"])
                #expect(attempt.status != 0, "nobody connected through \(target[1]): \(attempt.output)")
                #expect(
                    attempt.output.contains("Permission denied") || attempt.output.contains("No such file")
                        || attempt.output.contains("Connection refused"),
                    "\(attempt.output)")
            }
        }
    }
}
