#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Postgres
import SyncService
import Testing
import TestSupport

/// The path of a new user, with the real binary and a real embedded PostgreSQL: the
/// development credentials and their banner, the README's first-run block run as written, one
/// owner per embedded PostgreSQL, and a postmaster that dies under a running `serve`.
@Suite("First run: the embedded development mode", .serialized)
struct FirstRunTests {
    @Test("development credentials are made once (0600), printed in one banner whose requests work, kept out of the logs, and the same after a restart")
    func developmentCredentials() async throws {
        let serve = try EmbeddedServe()
        defer { serve.cleanUp() }
        try await serve.start(environment: ["SUBSYNC_LOG_LEVEL": "trace"])
        let adminKey = try serve.file("admin-key")
        let tokenSecret = try serve.file("token-secret")
        for name in ["admin-key", "token-secret", "secret-key"] {
            let mode = try FileManager.default.attributesOfItem(atPath: serve.dataDirectory.appendingPathComponent(name).path)[.posixPermissions] as? Int
            #expect(mode == 0o600, "\(name) has mode \(String(mode ?? 0, radix: 8))")
        }
        #expect(adminKey.count >= 40 && tokenSecret.count >= 60)

        let output = try serve.output()
        let banner = try #require(EmbeddedServe.banner(in: output), "no banner in:\n\(output)")
        #expect(banner.contains(adminKey) && banner.contains(tokenSecret))
        let outside = output.replacingOccurrences(of: banner, with: "")
        #expect(outside.contains("trace") || outside.contains("debug"), "expected verbose logs")
        #expect(!outside.contains(adminKey), "the admin key appears outside the banner")
        #expect(!outside.contains(tokenSecret), "the token secret appears outside the banner")

        // The banner's first requests, pasted as they are.
        let paste = try #require(EmbeddedServe.pasteBlock(in: banner))
        let pasted = try await runBash(paste, directory: serve.directory, seconds: 600)
        #expect(pasted.status == 0, "\(pasted.output)")
        let answers = pasted.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(answers.count == 2, "\(pasted.stdout)")
        #expect(answers.first?["accepted"] as? Int == 1, "\(pasted.stdout)")
        #expect(answers.last?["account_id"] as? String == "demo-user")

        // The token secret signs device tokens the service accepts, for their own account only.
        let authenticator = await Authenticator(adminKey: nil, tokenSecret: tokenSecret)
        let token = try await authenticator.mint(accountID: "demo-user", validFor: 600)
        #expect(await serve.status("/v1/accounts/demo-user", credential: token) == 200)
        #expect(await serve.status("/v1/accounts/someone-else", credential: token) == 403)

        // A restart reads the same credentials back: what was pasted keeps working.
        try await serve.stop()
        try await serve.start()
        #expect(try serve.file("admin-key") == adminKey)
        #expect(try EmbeddedServe.banner(in: serve.output())?.contains(adminKey) == true)
        #expect(await serve.status("/v1/accounts/demo-user", credential: adminKey) == 200)
        try await serve.stop()
    }

    @Test("credentials of your own are used and not printed; with a DATABASE_URL none are made")
    func noDevelopmentCredentialsWhenConfigured() async throws {
        let own = try EmbeddedServe()
        defer { own.cleanUp() }
        let key = "my-own-admin-key-\(UUID().uuidString)"
        try await own.start(environment: ["SUBSYNC_ADMIN_KEY": key])
        #expect(!FileManager.default.fileExists(atPath: own.dataDirectory.appendingPathComponent("admin-key").path))
        #expect(!(try own.output()).contains(key))
        #expect(await own.status("/v1/accounts/a", credential: key) == 200)
        try await own.stop()

        let production = try EmbeddedServe()
        defer { production.cleanUp() }
        let url = try TestDatabase.url()
        try await production.start(environment: ["DATABASE_URL": url, "SUBSYNC_REQUIRE_SIGNED": "false"])
        for name in ["admin-key", "token-secret", "secret-key", "database-url"] {
            #expect(!FileManager.default.fileExists(atPath: production.dataDirectory.appendingPathComponent(name).path), "\(name) made with a DATABASE_URL")
        }
        let output = try production.output()
        #expect(EmbeddedServe.banner(in: output) == nil)
        #expect(output.contains("admin access is disabled"))
        try await production.stop()
    }

    @Test("the README's first-run block runs as written against a fresh serve")
    func readmeFirstRun() async throws {
        let readme = try String(contentsOf: TestPackage.root.appendingPathComponent("README.md"), encoding: .utf8)
        let begin = try #require(readme.range(of: "<!-- first-run: begin -->\n```sh\n"))
        let end = try #require(readme.range(of: "```\n<!-- first-run: end -->", range: begin.upperBound..<readme.endIndex))
        let block = String(readme[begin.upperBound..<end.lowerBound])
        #expect(block.contains("127.0.0.1:8080") && block.contains("9000") && block.contains("subsync accounts show"))

        let serve = try EmbeddedServe()
        defer { serve.cleanUp() }
        // The block runs where `scripts/run` runs: beside `scripts/`, `Tests/` (its webhook
        // receiver is Tests/Doubles/webhook-receiver.py) and `.build/release/subsync`.
        let release = serve.directory.appendingPathComponent(".build/release")
        try FileManager.default.createDirectory(at: release, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: release.appendingPathComponent("subsync"), withDestinationURL: TestPackage.subsyncBinary)
        for folder in ["scripts", "Tests"] {
            try FileManager.default.createSymbolicLink(
                at: serve.directory.appendingPathComponent(folder), withDestinationURL: TestPackage.root.appendingPathComponent(folder))
        }
        try await serve.start(dataDirectory: nil)

        // Only the ports change: the machine running the tests may have 8080 and 9000 taken.
        let receiverPort = freeTCPPort()
        let script = block.replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:\(serve.httpPort)")
            .replacingOccurrences(of: "127.0.0.1:9000", with: "127.0.0.1:\(receiverPort)")
            .replacingOccurrences(of: "--port 9000", with: "--port \(receiverPort)")
        let run = try await runBash(script, directory: serve.directory, seconds: 900)
        #expect(run.status == 0, "\(run.output)")
        #expect(run.stdout.contains(#""status":"ready""#), "\(run.stdout)")
        #expect(run.stdout.contains(#""accepted":1"#), "\(run.stdout)")
        #expect(run.stdout.contains(#""verified_by": ["#) && run.stdout.contains("demo-user"), "no verified delivery: \(run.stdout)")
        #expect(!run.stdout.contains(#""verified_by": []"#), "a delivery failed verification: \(run.stdout)")
        // `subsync accounts show` comes last, after the receiver's log (a JSON array): the purchase
        // is resolved by then, since its webhook arrived.
        let story = try #require(run.stdout.range(of: "\n]\n", options: .backwards).map { String(run.stdout[$0.upperBound...]) })
        #expect(story.contains("demo-user") && story.contains("premium"), "\(story)")
        try await serve.stop()
    }

    @Test("a second serve on a data folder a live one owns exits 69 naming it; after the owner exits, the next one serves")
    func oneOwnerPerEmbeddedPostgres() async throws {
        let first = try EmbeddedServe()
        defer { first.cleanUp() }
        try await first.start()
        let firstPID = try #require(first.process?.processIdentifier)

        let second = try EmbeddedServe(sharing: first)
        let refused = try await second.runToExit(seconds: 300)
        #expect(refused.status == 69, "\(refused.output)")
        #expect(refused.output.contains("belongs to process \(firstPID)"), "\(refused.output)")
        // Polled: /readyz gives the database 2 s, which a busy machine can take.
        #expect(await waitUntil(seconds: 300) { await first.status("/readyz") == 200 }, "the owner was disturbed")

        // The owner shuts down while a third one starts: the third either is refused (the owner
        // is still shutting down) and is started again, or serves; it never adopts a PostgreSQL
        // that is about to be stopped under it.
        first.process?.terminate()
        let third = try EmbeddedServe(sharing: first)
        defer { third.cleanUp() }
        var attempts = 0
        while true {
            attempts += 1
            try third.launch()
            let outcome = await third.readyOrExited(seconds: 600)
            if outcome == .ready { break }
            let output = try third.output()
            // Still running, neither ready nor refused: its exit status cannot be read.
            guard outcome == .exited else { Issue.record("the third serve neither became ready nor exited: \(output)"); return }
            #expect(third.process?.terminationStatus == 69 && output.contains("belongs to process \(firstPID)"), "\(output)")
            guard attempts < 60 else { Issue.record("the third serve never started"); return }
            try await Task.sleep(for: .milliseconds(500))
        }
        try #require(await first.waitForExit(seconds: 300), "the first serve did not stop after SIGTERM")
        #expect(first.process?.terminationStatus == 0)
        // With the first one gone, the third still serves: its PostgreSQL was not stopped under it.
        #expect(await waitUntil(seconds: 300) { await third.status("/readyz") == 200 })
        #expect(try await third.sync(account: "after-handover") == 202)
        try await third.stop()
    }

    @Test("kill -9 of the embedded postmaster under a running serve: serve starts it again and answers")
    func postmasterKilledIsRestarted() async throws {
        let serve = try EmbeddedServe()
        defer { serve.cleanUp() }
        try await serve.start()
        let killed = try #require(serve.postmasterPID())
        #expect(kill(killed, SIGKILL) == 0)
        #expect(await waitUntil(seconds: 300) {
            if let pid = serve.postmasterPID(), pid != killed, kill(pid, 0) == 0 {
                return await serve.status("/readyz") == 200
            }
            return false
        }, "PostgreSQL was not started again: \((try? serve.output()) ?? "")")
        #expect(try await waitUntil(seconds: 300) { try await serve.sync(account: "after-kill") == 202 })
        #expect(serve.process?.isRunning == true)
        #expect(try serve.output().contains("the embedded PostgreSQL is gone; starting it again"))
        try await serve.stop()
    }

    @Test("a postmaster that cannot be started again makes serve exit 69 instead of answering 503 for good")
    func postmasterThatCannotRestartEndsServe() async throws {
        let serve = try EmbeddedServe()
        defer { serve.cleanUp() }
        try await serve.start()
        let postgres = serve.dataDirectory.appendingPathComponent("postgres")
        try FileManager.default.moveItem(
            at: postgres.appendingPathComponent("postgresql.conf"), to: postgres.appendingPathComponent("postgresql.conf.moved"))
        let killed = try #require(serve.postmasterPID())
        #expect(kill(killed, SIGKILL) == 0)
        try #require(await serve.waitForExit(seconds: 600), "serve kept running without its database")
        #expect(serve.process?.terminationStatus == 69)
        let output = try serve.output()
        #expect(output.contains("could not be restarted (5 attempts"), "\(output)")
    }
}

/// One `subsync serve` process in the embedded mode, in a folder of its own.
final class EmbeddedServe: @unchecked Sendable {
    // @unchecked: a test drives one instance from one task at a time.

    /// The working folder; the data folder is `.subsync` in it, as with `scripts/run`.
    let directory: URL
    let postgresPort: Int
    /// The process, launched by ``launch(environment:dataDirectory:)``.
    let server: ServeProcess
    let owned: Bool

    var dataDirectory: URL { directory.appendingPathComponent(".subsync") }
    var httpPort: Int { server.port }
    var process: Process? { server.process }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("subsync-first-run-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        postgresPort = freeTCPPort()
        server = ServeProcess(logDirectory: directory)
        owned = true
    }

    /// Another serve on the same data folder (and so the same PostgreSQL).
    init(sharing other: EmbeddedServe) throws {
        directory = other.directory
        postgresPort = other.postgresPort
        server = ServeProcess(logDirectory: directory)
        owned = false
    }

    func launch(environment overrides: [String: String] = [:], dataDirectory: String? = ".subsync") throws {
        var environment = [
            "SUBSYNC_EMBEDDED_PG_PORT": String(postgresPort), "SUBSYNC_WORKERS": "1",
            // PostgreSQL on a busy core can be silent longer than serve's 15 s default.
            "SUBSYNC_DB_ANSWER_TIMEOUT_SECONDS": "600",
        ]
        environment.merge(overrides) { $1 }
        try server.launch(
            dataDirectory.map { ["--data-dir", $0] } ?? [], environment: environment,
            removing: ["DATABASE_URL", "SUBSYNC_ADMIN_KEY", "SUBSYNC_TOKEN_SECRET", "SUBSYNC_SECRET_KEYS", "SUBSYNC_WEBHOOK_ALLOW", "SUBSYNC_DATA_DIR"],
            directory: directory)
    }

    func readyOrExited(seconds: Double) async -> ServeProcess.Outcome? {
        await server.readyOrExited(seconds: seconds)
    }

    /// Starts serve and waits until it is ready.
    func start(environment: [String: String] = [:], dataDirectory: String? = ".subsync") async throws {
        try launch(environment: environment, dataDirectory: dataDirectory)
        let outcome = await readyOrExited(seconds: 600)
        guard outcome == .ready else {
            Issue.record("serve did not become ready (\(String(describing: outcome))): \((try? output()) ?? "")")
            throw CancellationError()
        }
    }

    /// Runs serve until it exits by itself.
    func runToExit(seconds: Double) async throws -> (status: Int32, output: String) {
        try launch()
        guard await server.waitForExit(seconds: seconds) else {
            server.terminate()
            return (-1, try output())
        }
        return (server.terminationStatus, try output())
    }

    /// SIGTERM, and a clean exit.
    func stop() async throws {
        try #require(await server.stop(), "serve did not stop after SIGTERM")
        #expect(server.terminationStatus == 0, "\((try? output()) ?? "")")
    }

    func output() throws -> String { try server.output() }

    func waitForExit(seconds: Double) async -> Bool { await server.waitForExit(seconds: seconds) }

    func file(_ name: String) throws -> String {
        try String(contentsOf: dataDirectory.appendingPathComponent(name), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func postmasterPID() -> Int32? {
        (try? LocalServer(dataDirectory: dataDirectory.appendingPathComponent("postgres"), port: postgresPort))?.postmasterPID
    }

    func status(_ path: String, credential: String? = nil) async -> Int {
        let headers = credential.map { ["-H", "Authorization: Bearer \($0)"] } ?? []
        let result = try? await runProcess("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "300"] + headers + ["http://127.0.0.1:\(httpPort)\(path)"])
        return Int(result?.stdout ?? "") ?? 0
    }

    /// A sync of one unsigned purchase with the development admin key; the HTTP status.
    func sync(account: String) async throws -> Int {
        let key = try file("admin-key")
        let body = #"{"device": {"id": "d1"}, "reports": [{"report_id": "r-\#(account)", "observed_at": "2026-01-01T00:00:00Z", "product_id": "voip.basic.monthly", "original_transaction_id": "t-\#(account)", "transaction_id": "t-\#(account)", "purchased_at": "2026-01-01T00:00:00Z", "expires_at": "2036-01-01T00:00:00Z"}]}"#
        let result = try await runProcess("/usr/bin/curl", [
            "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "300", "-X", "POST",
            "-H", "Authorization: Bearer \(key)", "-H", "Content-Type: application/json", "-d", body,
            "http://127.0.0.1:\(httpPort)/v1/accounts/\(account)/sync?wait_ms=5000",
        ])
        return Int(result.stdout) ?? 0
    }

    func cleanUp() {
        if let process, process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        guard owned else { return }
        if let server = try? LocalServer(dataDirectory: dataDirectory.appendingPathComponent("postgres"), port: postgresPort) {
            try? server.stop(mode: "immediate")
        }
        try? FileManager.default.removeItem(at: directory)
    }

    /// The development banner: from its first rule line to its last.
    static func banner(in output: String) -> String? {
        let rule = String(repeating: "=", count: 100)
        guard let first = output.range(of: rule), let last = output.range(of: rule, range: first.upperBound..<output.endIndex) else { return nil }
        return String(output[first.lowerBound..<last.upperBound])
    }

    /// The banner's ready-to-paste requests.
    static func pasteBlock(in banner: String) -> String? {
        let lines = banner.split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(where: { $0.hasPrefix("First requests") }),
            let end = lines.firstIndex(where: { $0.hasPrefix("Command line:") }), start < end
        else { return nil }
        return lines[(start + 1)..<end].map { $0.dropFirst(2) }.joined(separator: "\n") + "\n"
    }
}

/// Runs `script` with `bash -e -o pipefail` in `directory`; its stdout, and stdout with stderr.
func runBash(_ script: String, directory: URL, seconds: Double) async throws -> (status: Int32, stdout: String, output: String) {
    let file = directory.appendingPathComponent("script-\(UUID().uuidString).sh")
    try script.write(to: file, atomically: true, encoding: .utf8)
    defer { try? FileManager.default.removeItem(at: file) }
    let result = try await runProcess("/usr/bin/timeout", [String(Int(seconds)), "/bin/bash", "-e", "-o", "pipefail", file.path], directory: directory)
    return result
}

