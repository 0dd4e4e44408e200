import Foundation
import Postgres
import SubsyncClient
import TestSupport
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// SubsyncClient reads at most `maximumAnswerBytes` of an answer (docs/CLIENT.md): a service or
/// proxy gone wrong, or an attacker on an `http://` development URL, must not exhaust the app's
/// memory with an endless answer. Against the real service (the limit is exact, and nothing in
/// the outbox is lost) and against Tests/Doubles/endless-answers.py, a real server that answers every
/// request with 64 MiB, announced or chunked.
@Suite("SubsyncClient: the answer limit", .serialized)
struct ClientAnswerLimitTests {
    @Test("an answer over the limit is answerTooLarge; the outbox keeps its items, and a client with room delivers them")
    func limitAgainstTheService() async throws {
        try await TestEnvironment.withFresh { env in
            try await ClientTests.withFolder { folder in
                let port = freeTCPPort()
                try await ClientTests.serving(try env.application(port: port), port: port) {
                    // The service's answer to a sync is a few hundred bytes: 64 is too few.
                    let tight = try ClientTests.client(env, port: port, account: "lena", folder: folder, maximumAnswerBytes: 64)
                    let outcome = try await tight.sync([ClientTests.unsigned("t1")])
                    #expect(outcome == .failed(.answerTooLarge(limit: 64), delivered: 0))
                    #expect(await tight.pendingCount == 1, "the report waits in the outbox")
                    #expect(await ClientTests.first(of: tight.errors) == .answerTooLarge(limit: 64), "the app hears of it")
                    await #expect(throws: SubsyncClientError.answerTooLarge(limit: 64)) { try await tight.refresh() }

                    // The same folder with the default limit (4 MiB) sends it.
                    let roomy = try ClientTests.client(env, port: port, account: "lena", folder: folder)
                    #expect(await roomy.flush() == .delivered(1))
                    #expect(await roomy.tier() == "premium")
                    let snapshot = try await roomy.refresh()
                    #expect(snapshot.tier == "premium")
                }
            }
        }
    }

    @Test("an endless answer, announced by Content-Length or chunked, is answerTooLarge long before its end", arguments: ["length", "chunked"])
    func endlessAnswer(mode: String) async throws {
        let (server, port) = try await Self.launch()
        defer { server.terminateOrKill() }
        try await ClientTests.withFolder { folder in
            let limit = 1 << 20
            let client = try Self.client(port: port, path: mode, folder: folder, limit: limit)

            await #expect(throws: SubsyncClientError.answerTooLarge(limit: limit)) { try await client.refresh() }
            let outcome = try await client.sync([ClientTests.unsigned("t1")])
            #expect(outcome == .failed(.answerTooLarge(limit: limit), delivered: 0))
            #expect(await client.pendingCount == 1, "the report waits in the outbox")

            // Each answer ended (the client hung up, or read on to the end): FoundationNetworking
            // reads ahead of its delegate with no backpressure, so on Linux the client's limit
            // bounds what it keeps, not what the URL loading system reads (docs/CLIENT.md, *Answers*).
            let ended = await waitUntil(seconds: 300) {
                guard let log = try? await Self.log(port: port) else { return false }
                return log.requests >= 2 && log.sent.count == log.requests
            }
            #expect(ended)
        }
    }

    /// A client of the endless-answers server at `path`, with `limit` and `timeout`.
    static func client(port: Int, path: String, folder: URL, limit: Int = 1 << 20, timeout: TimeInterval = 300) throws -> SubsyncClient {
        var configuration = SubsyncConfiguration(
            baseURL: try #require(URL(string: "http://127.0.0.1:\(port)/\(path)")), accountID: "mia", storageDirectory: folder,
            session: URLSession(configuration: .ephemeral), tokenProvider: { "token" })
        configuration.requestTimeout = timeout
        configuration.maximumAnswerBytes = limit
        return try SubsyncClient(configuration: configuration)
    }

    static func launch(size: Int = 64 << 20) async throws -> (Process, Int) {
        try await runBlocking { try Process.launchReportingPort([try TestPackage.python(), Self.script.path, "--size", String(size)]) }
    }

    @Test("the limit is exact: an answer of exactly maximumAnswerBytes is read, one byte more is answerTooLarge", arguments: ["exact-length", "exact-chunked"])
    func limitIsExact(mode: String) async throws {
        let (server, port) = try await Self.launch()
        defer { server.terminateOrKill() }
        try await ClientTests.withFolder { folder in
            let size = 100_000
            // Read whole: the body is no account, so the error is the decoding's, not the limit's.
            let roomy = try Self.client(port: port, path: "\(mode)/\(size)", folder: folder.appendingPathComponent("a"), limit: size)
            do {
                _ = try await roomy.refresh()
                Issue.record("a body that is no account was taken")
            } catch {
                #expect(error as? SubsyncClientError != .answerTooLarge(limit: size), "\(error)")
            }
            let tight = try Self.client(port: port, path: "\(mode)/\(size)", folder: folder.appendingPathComponent("b"), limit: size - 1)
            await #expect(throws: SubsyncClientError.answerTooLarge(limit: size - 1)) { try await tight.refresh() }
        }
    }

    @Test("a head announcing too much, then silence: answerTooLarge at once, not at the request's timeout")
    func announcedThenSilent() async throws {
        let (server, port) = try await Self.launch()
        defer { server.terminateOrKill() }
        try await ClientTests.withFolder { folder in
            let client = try Self.client(port: port, path: "silent", folder: folder, timeout: 600)
            let started = ContinuousClock.now
            await #expect(throws: SubsyncClientError.answerTooLarge(limit: 1 << 20)) { try await client.refresh() }
            // The server stays silent for 10 minutes and the timeout is as long: only the head's
            // length can have ended it (generous for a busy core).
            #expect(ContinuousClock.now - started < .seconds(300))
        }
    }

    @Test("an answer trickled a byte at a time, never silent for long, ends at requestTimeout in all; the outbox keeps its item")
    func trickledAnswerMeetsTheDeadline() async throws {
        let (server, port) = try await Self.launch()
        defer { server.terminateOrKill() }
        try await ClientTests.withFolder { folder in
            // URLRequest's timeout alone restarts with every byte: this answer would last 10 minutes.
            let client = try Self.client(port: port, path: "trickle", folder: folder, timeout: 3)
            let started = ContinuousClock.now
            do {
                _ = try await client.refresh()
                Issue.record("a trickled answer was taken")
            } catch {
                guard case .unreachable(let reason) = error as? SubsyncClientError else {
                    Issue.record("expected unreachable, got \(error)")
                    return
                }
                #expect(reason.contains("within 3.0 s"), "\(reason)")
            }
            let outcome = try await client.sync([ClientTests.unsigned("t1")])
            guard case .failed(.unreachable, 0) = outcome else {
                Issue.record("expected unreachable, got \(outcome)")
                return
            }
            #expect(await client.pendingCount == 1, "the report waits in the outbox")
            #expect(ContinuousClock.now - started < .seconds(300), "both requests ended long before the answers would have")
        }
    }

    static var script: URL { TestPackage.double("endless-answers.py") }

    struct Log: Decodable, Sendable {
        var requests: Int
        /// The bytes the server wrote of each finished answer.
        var sent: [Int]
    }

    static func log(port: Int) async throws -> Log {
        var request = URLRequest(url: try #require(URL(string: "http://127.0.0.1:\(port)/_sent")))
        request.timeoutInterval = 300
        let (data, _) = try await URLSession.shared.data(for: request)
        return try JSONDecoder().decode(Log.self, from: data)
    }
}
