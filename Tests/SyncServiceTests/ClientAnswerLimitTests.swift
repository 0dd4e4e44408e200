import Foundation
import Postgres
import SubsyncClient
import TestSupport
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// SubsyncClient reads at most `maximumAnswerBytes` of an answer (issue #52, item 8): a service or
/// proxy gone wrong, or an attacker on an `http://` development URL, must not exhaust the app's
/// memory with an endless answer. Against the real service (the limit is exact, and nothing in
/// the outbox is lost) and against scripts/endless-answers.py, a real server that answers every
/// request with 64 MiB, announced or chunked.
@Suite("SubsyncClient: the answer limit", .serialized)
struct ClientAnswerLimitTests {
    @Test("an answer over the limit is answerTooLarge; the outbox keeps its items, and a client with room delivers them")
    func limitAgainstTheService() async throws {
        try await TestEnvironment.withFresh { env in
            try await ClientTests.withFolder { folder in
                let port = freeTCPPort()
                try await ClientTests.serving(env.application(port: port), port: port) {
                    // The service's answer to a sync is a few hundred bytes: 64 is too few.
                    let tight = try ClientTests.client(env, port: port, account: "lena", folder: folder, maximumAnswerBytes: 64)
                    let outcome = try await tight.sync([ClientTests.unsigned("t1")])
                    #expect(outcome == .failed(.answerTooLarge(limit: 64), delivered: 0))
                    #expect(await tight.pendingCount == 1, "the report waits in the outbox")
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
        let (server, port) = try await runBlocking {
            try Process.launchReportingPort(["python3", Self.script.path, "--size", String(64 << 20)])
        }
        defer { server.terminateOrKill() }
        try await ClientTests.withFolder { folder in
            var configuration = SubsyncConfiguration(
                baseURL: try #require(URL(string: "http://127.0.0.1:\(port)/\(mode)")), accountID: "mia", storageDirectory: folder,
                session: URLSession(configuration: .ephemeral), tokenProvider: { "token" })
            configuration.requestTimeout = 300
            let limit = 1 << 20
            configuration.maximumAnswerBytes = limit
            let client = try SubsyncClient(configuration: configuration)

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

    static var script: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/endless-answers.py")
    }

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
