import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Postgres
import TestSupport

/// The App Store Server API double in Tests/Doubles/appstore-double.py, run as a separate process: a
/// real HTTP server on loopback that verifies every request's JWT with PyJWT against the public
/// half of Apple's published test key and answers what the test scripted.
final class AppStoreDouble: @unchecked Sendable {
    // @unchecked: `process` is set once in `init` and only read after.
    private let process: Process
    let port: Int

    static let keyID = "TESTKEY123"
    static let issuerID = "11111111-2222-3333-4444-555555555555"

    /// Apple's published test key (app-store-server-library), in Tests/Fixtures.
    static var keyFile: URL { TestPackage.fixture("apple-app-store-server-library/certs/testSigningKey.p8") }

    static var script: URL { TestPackage.double("appstore-double.py") }

    /// One request the double received.
    struct Request: Decodable {
        var method: String
        var path: String
        var query: [String: String]
        var body: String
        var time: Double
        var jwt: JWTCheck

        struct JWTCheck: Decodable {
            var valid: Bool
            var error: String?
            var header: [String: String]?
            var claims: Claims?
        }

        struct Claims: Decodable {
            var iss: String
            var iat: Double
            var exp: Double
            var aud: String
            var bid: String
        }
    }

    /// One scripted answer.
    struct Answer: Encodable {
        var status: Int = 200
        var json: JSONValue?
        var headers: [String: String]?
        var delay: Double?
        var raw: String?
    }

    init(bundleID: String) async throws {
        let arguments = [
            try TestPackage.python(), Self.script.path, "--key-file", Self.keyFile.path, "--key-id", Self.keyID, "--issuer", Self.issuerID,
            "--bundle", bundleID,
        ]
        (process, port) = try await runBlocking { try Process.launchReportingPort(arguments) }
    }

    deinit { stop() }

    var baseURL: String { "http://127.0.0.1:\(port)" }

    func stop() {
        if process.isRunning { process.terminateOrKill() }
    }

    /// Scripts what `method path` (with exactly `query`, when given) answers, in order; the last
    /// answer repeats.
    func script(_ method: String, _ path: String, query: [String: String]? = nil, _ answers: [Answer]) async throws {
        struct Script: Encodable {
            var method: String
            var path: String
            var query: [String: String]?
            var answers: [Answer]
        }
        try await post("/__double/script", body: try JSONEncoder().encode(Script(method: method, path: path, query: query, answers: answers)))
    }

    func requests() async throws -> [Request] {
        var request = URLRequest(url: URL(string: "\(baseURL)/__double/requests")!)
        request.timeoutInterval = 300
        let (data, _) = try await URLSession.shared.data(for: request)
        return try JSONDecoder().decode([Request].self, from: data)
    }

    private func post(_ path: String, body: Data) async throws {
        var request = URLRequest(url: URL(string: "\(baseURL)\(path)")!)
        request.httpMethod = "POST"
        request.httpBody = body
        request.timeoutInterval = 300
        _ = try await URLSession.shared.data(for: request)
    }
}

/// JSON built in a test, for the double's scripted answers.
indirect enum JSONValue: Encodable, ExpressibleByDictionaryLiteral, ExpressibleByArrayLiteral, ExpressibleByStringLiteral,
    ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral
{
    case object([String: JSONValue])
    case array([JSONValue])
    case string(String)
    case number(Double)
    case bool(Bool)

    init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last })) }
    init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    init(stringLiteral value: String) { self = .string(value) }
    init(integerLiteral value: Int) { self = .number(Double(value)) }
    init(booleanLiteral value: Bool) { self = .bool(value) }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .object(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .number(let value):
            if value == value.rounded(), abs(value) < 1e15 { try container.encode(Int64(value)) } else { try container.encode(value) }
        case .bool(let value): try container.encode(value)
        }
    }
}
