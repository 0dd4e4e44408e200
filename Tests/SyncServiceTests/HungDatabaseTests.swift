#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Postgres
import NIOConcurrencyHelpers
import SyncService
import SyncStore
import Testing
import TestSupport

/// A database that accepts connections but does not answer: every process of a real cluster
/// stopped with SIGSTOP (the postmaster and its backends), then resumed.
@Suite("A hung database", .serialized)
struct HungDatabaseTests {
    @Test("readyz and sync answer 503 with Retry-After while PostgreSQL is stopped; afterwards nothing accepted is lost", .timeLimit(.minutes(15)))
    func hungDatabaseIsNotAHungService() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("subsync-hung-\(UUID().uuidString)")
        let server = try LocalServer(dataDirectory: directory, port: LocalServer.freePort())
        let stopped = StoppedProcesses()
        defer {
            stopped.resume()
            try? server.stop(mode: "immediate")
            try? FileManager.default.removeItem(at: directory)
        }
        try await runBlocking { try server.start() }
        var connection = server.connectionConfiguration
        connection.answerTimeout = 2
        let pool = ConnectionPool(configuration: .init(connection: connection, maximumConnections: 4, leaseTimeout: .seconds(60)))
        try await Migrator().migrate(pool: pool)
        let env = TestEnvironment(
            connection: connection, pool: pool,
            authenticator: await Authenticator(adminKey: TestCredentials.adminKey, tokenSecret: TestCredentials.tokenSecret),
            logger: Logger(label: "test"))

        try await env.application(workers: 1).testLive { client in
            let before = try await client.sync(account: "before", body: SyncBody(device: "d", reports: [TestReports.report("b1")]).data)
            #expect(before.status == .accepted && before.json["accepted"] as? Int == 1)

            let processes = try Self.clusterProcesses(server)
            #expect(processes.count >= 2, "postmaster and backends")
            stopped.stop(processes)

            // The sync takes the idle connection whose backend is stopped: its statement meets
            // the answer timeout, not a hang.
            let during = try await client.sync(
                account: "during", body: SyncBody(device: "d", reports: [TestReports.report("d1")]).data, waitMilliseconds: nil)
            #expect(during.status == .serviceUnavailable, "\(during.json)")
            #expect((during.json["error"] as? [String: Any])?["code"] as? String == "unavailable")

            // A probe closes its connection (docs/SECURITY.md), so each goes on one of its own.
            let port = try #require(client.port)
            let probe = try await runProcess("/usr/bin/curl", ["-s", "-i", "--max-time", "60", "http://localhost:\(port)/readyz"])
            #expect(probe.stdout.hasPrefix("HTTP/1.1 503"), "\(probe.stdout)")
            #expect(probe.stdout.lowercased().contains("retry-after:"), "\(probe.stdout)")
            stopped.resume()
            #expect(await waitUntil { await httpStatus("http://localhost:\(port)/readyz") == 200 })
            // What was accepted before is there; the refused sync, sent again, is stored once
            // (a duplicate if the stopped server had committed it after all).
            let read = try await client.getJSON("/v1/accounts/before")
            #expect(read.json["tier"] as? String == "premium")
            var again = (status: HTTPResponse.Status.serviceUnavailable, json: [String: Any]())
            #expect(try await waitUntil {
                again = try await client.sync(account: "during", body: SyncBody(device: "d", reports: [TestReports.report("d1")]).data)
                return again.status == .accepted
            })
            #expect((again.json["accepted"] as? Int ?? 0) + (again.json["duplicates"] as? Int ?? 0) == 1, "\(again.json)")
            #expect(try await env.count("reports", accountID: "during") == 1)
            #expect(try await env.count("reports", accountID: "before") == 1)
        }
        await pool.close()
    }

    /// Processes stopped with SIGSTOP, resumed exactly once (by the test, or by its cleanup).
    final class StoppedProcesses: Sendable {
        private let pids = NIOLockedValueBox<[Int32]>([])

        func stop(_ processes: [Int32]) {
            pids.withLockedValue { $0 = processes }
            for pid in processes { kill(pid, SIGSTOP) }
        }

        func resume() {
            for pid in pids.withLockedValue({ pids in defer { pids = [] }; return pids }) { kill(pid, SIGCONT) }
        }
    }

    /// The postmaster of `server` and every process it started.
    static func clusterProcesses(_ server: LocalServer) throws -> [Int32] {
        let postmaster = try #require(server.postmasterPID)
        var children: [Int32] = []
        for entry in try FileManager.default.contentsOfDirectory(atPath: "/proc") {
            guard let pid = Int32(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { continue }
            // pid (comm) state ppid ...; comm may hold spaces, so read after the last ')'.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, Int32(fields[1]) == postmaster { children.append(pid) }
        }
        return [postmaster] + children
    }
}
