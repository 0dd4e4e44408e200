import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Postgres
import SubsyncWebhooks

/// The Python receiver in Tests/Doubles/webhook-receiver.py, run as a separate process: a real HTTP
/// server that checks every signature with the `standardwebhooks` package from PyPI.
public final class WebhookReceiver: @unchecked Sendable {
    // @unchecked: `process` is only replaced by `restart()`, which tests call from one task.
    private var process: Process
    public let port: Int

    public struct Entry: Decodable {
        public var path: String
        public var id: String
        public var timestamp: String?
        public var signature: String?
        public var verifiedBy: [Int]
        public var status: Int
        public var receivedAt: Double
        public var body: Body?

        public struct Body: Decodable {
            public var type: String
            public var timestamp: String
            public var data: Data

            public struct Data: Decodable {
                public var id: String
                public var accountID: String
                public var sequence: Int
                /// The entitlement after the change, read with the backend library's type.
                public var current: WebhookEntitlement?

                public enum CodingKeys: String, CodingKey {
                    case id
                    case accountID = "account_id"
                    case sequence, current
                }
            }
        }

        public enum CodingKeys: String, CodingKey {
            case path, id, timestamp, signature, status, body
            case verifiedBy = "verified_by"
            case receivedAt = "received_at"
        }
    }

    public static var script: URL { TestPackage.double("webhook-receiver.py") }

    /// Launches the receiver off the cooperative pool: `launch` blocks until Python has started.
    public init(port requested: Int = 0) async throws {
        (process, port) = try await runBlocking { try WebhookReceiver.launch(port: requested) }
    }

    private static func launch(port: Int, secrets: [String] = []) throws -> (Process, Int) {
        // The tests check signatures with the standardwebhooks package itself, never the
        // receiver's standard-library fallback (that one is for the README's first run).
        try Process.launchReportingPort(
            [try TestPackage.python(), script.path, "--port", String(port), "--verifier", "standardwebhooks"]
                + secrets.flatMap { ["--secret", $0] })
    }

    public struct ReceiverError: Error, CustomStringConvertible {
        public var description: String
        public init(_ description: String) { self.description = description }
    }

    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// Sets the secrets the receiver verifies with.
    public func setSecrets(_ secrets: [String]) async throws {
        var request = URLRequest(url: URL(string: url("/_secrets"))!)
        request.httpMethod = "POST"
        request.httpBody = try JSONSerialization.data(withJSONObject: ["secrets": secrets])
        request.timeoutInterval = 300
        _ = try await URLSession.shared.data(for: request)
    }

    /// Makes every webhook path answer 500 (`"500"`), wait (`"slow:<ms>"`), or behave (`"ok"`).
    public func setMode(_ mode: String) async throws {
        var request = URLRequest(url: URL(string: url("/_mode"))!)
        request.httpMethod = "POST"
        request.httpBody = try JSONSerialization.data(withJSONObject: ["mode": mode])
        request.timeoutInterval = 300
        _ = try await URLSession.shared.data(for: request)
    }

    public func entries() async throws -> [Entry] {
        // Up to 300 s (URLSession's default is 60): the receiver shares a busy core in --stress.
        var request = URLRequest(url: URL(string: url("/_log"))!)
        request.timeoutInterval = 300
        let (data, _) = try await URLSession.shared.data(for: request)
        return try JSONDecoder().decode([Entry].self, from: data)
    }

    /// Polls the log until `condition` holds (at most `seconds`).
    public func waitFor(seconds: Double = 300, _ condition: ([Entry]) -> Bool) async throws -> [Entry] {
        let deadline = Date().addingTimeInterval(seconds)
        var entries: [Entry] = []
        while Date() < deadline {
            entries = (try? await self.entries()) ?? entries
            if condition(entries) { return entries }
            try await Task.sleep(for: .milliseconds(100))
        }
        return entries
    }

    /// Stops the receiver: connections to its port are refused until `start()`.
    public func stop() {
        process.terminateOrKill()
    }

    /// Starts it again on the same port (with an empty log); `secrets` verify from its first
    /// request on.
    public func start(secrets: [String] = []) async throws {
        let port = port
        (process, _) = try await runBlocking { try WebhookReceiver.launch(port: port, secrets: secrets) }
    }

    deinit {
        if process.isRunning { process.terminate() }
    }
}

extension Process {
    /// Runs `arguments` (through `/usr/bin/env`) and reads its first line, `PORT <n>`: the port a
    /// test server (the Python webhook receiver, the App Store double) listens on. Blocking: call
    /// it through `runBlocking`.
    public static func launchReportingPort(_ arguments: [String]) throws -> (Process, Int) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        var line = Data()
        while let byte = try output.fileHandleForReading.read(upToCount: 1), !byte.isEmpty, byte != Data("\n".utf8) {
            line.append(byte)
        }
        let text = String(decoding: line, as: UTF8.self)
        guard text.hasPrefix("PORT "), let port = Int(text.dropFirst(5)) else {
            process.terminateOrKill()
            throw WebhookReceiver.ReceiverError("\(arguments.dropFirst().first ?? "server") did not start: \(text)")
        }
        return (process, port)
    }

    /// Terminates this child, and kills it if it is still running after `polls` × 20 ms; then
    /// waits as long again for it to be gone. Polls rather than `waitUntilExit()`, which was seen
    /// to hang on Linux.
    public func terminateOrKill(polls: Int = 100) {
        terminate()
        for _ in 0..<polls where isRunning { usleep(20_000) }
        if isRunning { kill(processIdentifier, SIGKILL) }
        for _ in 0..<polls where isRunning { usleep(20_000) }
    }
}
