import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Postgres
import SyncService
import SyncStore

/// The App Store Server API double in Tests/Doubles/appstore-double.py, run as a separate process: a
/// real HTTP server on loopback that verifies every request's JWT with PyJWT against the public
/// half of Apple's published test key and answers what the test scripted.
public final class AppStoreDouble: @unchecked Sendable {
    // @unchecked: `process` is set once in `init` and only read after.
    private let process: Process
    public let port: Int

    public static let keyID = "TESTKEY123"
    public static let issuerID = "11111111-2222-3333-4444-555555555555"

    /// Apple's published test key (app-store-server-library), in Tests/Fixtures.
    public static var keyFile: URL { TestPackage.fixture("apple-app-store-server-library/certs/testSigningKey.p8") }

    public static var script: URL { TestPackage.double("appstore-double.py") }

    /// One request the double received.
    public struct Request: Decodable {
        public var method: String
        public var path: String
        public var query: [String: String]
        public var body: String
        public var time: Double
        public var jwt: JWTCheck

        public struct JWTCheck: Decodable {
            public var valid: Bool
            public var error: String?
            public var header: [String: String]?
            public var claims: Claims?
        }

        public struct Claims: Decodable {
            public var iss: String
            public var iat: Double
            public var exp: Double
            public var aud: String
            public var bid: String
        }
    }

    /// One scripted answer.
    public struct Answer: Encodable {
        public var status: Int = 200
        public var json: JSONValue?
        public var headers: [String: String]?
        public var delay: Double?
        public var raw: String?

        public init(status: Int = 200, json: JSONValue? = nil, headers: [String: String]? = nil, delay: Double? = nil, raw: String? = nil) {
            self.status = status
            self.json = json
            self.headers = headers
            self.delay = delay
            self.raw = raw
        }
    }

    public init(bundleID: String) async throws {
        let arguments = [
            try TestPackage.python(), Self.script.path, "--key-file", Self.keyFile.path, "--key-id", Self.keyID, "--issuer", Self.issuerID,
            "--bundle", bundleID,
        ]
        (process, port) = try await runBlocking { try Process.launchReportingPort(arguments) }
    }

    deinit { stop() }

    public var baseURL: String { "http://127.0.0.1:\(port)" }

    public func stop() {
        if process.isRunning { process.terminateOrKill() }
    }

    /// Scripts what `method path` (with exactly `query`, when given) answers, in order; the last
    /// answer repeats.
    public func script(_ method: String, _ path: String, query: [String: String]? = nil, _ answers: [Answer]) async throws {
        struct Script: Encodable {
            public var method: String
            public var path: String
            public var query: [String: String]?
            public var answers: [Answer]
        }
        try await post("/__double/script", body: try JSONEncoder().encode(Script(method: method, path: path, query: query, answers: answers)))
    }

    public func requests() async throws -> [Request] {
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
public indirect enum JSONValue: Encodable, ExpressibleByDictionaryLiteral, ExpressibleByArrayLiteral, ExpressibleByStringLiteral,
    ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral
{
    case object([String: JSONValue])
    case array([JSONValue])
    case string(String)
    case number(Double)
    case bool(Bool)

    public init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last })) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }

    public func encode(to encoder: any Encoder) throws {
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

extension AppStoreDouble {
    /// An App Store Server API client of `double`, signing with its key.
    public static func client(
        _ double: AppStoreDouble, keyID: String = AppStoreDouble.keyID, rate: Double = 50, attempts: Int = 4,
        maximumRetryWait: Duration = .seconds(30), timeout: Duration = .seconds(300), shared: RateBuckets? = nil
    ) throws -> AppStoreServerAPI {
        let pem = try String(contentsOf: AppStoreDouble.keyFile, encoding: .utf8)
        let configuration = AppStoreAPIConfiguration(
            keyID: keyID, issuerID: AppStoreDouble.issuerID, bundleID: StoreKitTrust.bundleID,
            privateKey: try AppStoreAPIConfiguration.privateKey(pem: pem, source: "testSigningKey.p8"), environment: .production,
            baseURL: double.baseURL, requestsPerSecond: rate, requestTimeout: timeout, maximumAttempts: attempts,
            maximumRetryWait: maximumRetryWait)
        return AppStoreServerAPI(configuration: configuration, sharedBudget: shared)
    }

    /// An App Store Server API error answer.
    public static func error(_ code: Int, _ message: String) -> JSONValue { ["errorCode": .number(Double(code)), "errorMessage": .string(message)] }
}
