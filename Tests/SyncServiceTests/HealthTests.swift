import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Postgres
import SyncCore
import SyncService
import Testing
import TestSupport

@Suite("Health endpoints")
struct HealthTests {
    let logger = Logger(label: "test")

    func app(_ connection: ConnectionConfiguration) async throws -> some ApplicationProtocol {
        let pool = ConnectionPool(configuration: .init(connection: connection, maximumConnections: 2))
        let dependencies = ServiceDependencies(
            pool: pool,
            catalogue: .default,
            authenticator: await Authenticator(adminKey: nil, tokenSecret: nil),
            metricsRegistry: TestMetrics.registry
        )
        var configuration = ServiceConfiguration(port: 0, workers: 0)
        configuration.deliveryWorkers = 0
        return try buildApplication(configuration: configuration, dependencies: dependencies, logger: logger)
    }

    @Test("GET /healthz answers 200 without touching the database")
    func healthz() async throws {
        // A pool pointing at a port where nothing listens: healthz must not care.
        let unreachable = ConnectionConfiguration([("host", "127.0.0.1"), ("port", "1"), ("connect_timeout", "1")])
        let app = try await app(unreachable)
        try await app.test(.router) { client in
            try await client.execute(uri: "/healthz", method: .get) { response in
                #expect(response.status == .ok)
                #expect(String(buffer: response.body).contains("\"ok\""))
            }
        }
    }

    @Test("GET /readyz answers 200 when the database answers")
    func readyWithDatabase() async throws {
        let app = try await app(try TestDatabase.configuration())
        try await app.testLive { client in
            // readyz gives the database 2 s; on a starved single core (scripts/test --stress) the
            // first connection can take longer, and a 503 then is the right answer. What must
            // hold: it becomes 200 once the database answers in time, and every answer is JSON.
            var last: HTTPResponse.Status = .serviceUnavailable
            let ready = try await waitUntil {
                try await client.execute(uri: "/readyz", method: .get) { response in
                    #expect(response.headers[.contentType]?.hasPrefix("application/json") == true)
                    last = response.status
                    return response.status == .ok
                }
            }
            #expect(ready, "readyz still answered \(last)")
        }
    }

    @Test("GET /readyz answers 503 with Retry-After and a JSON error when the database is down")
    func notReadyWithoutDatabase() async throws {
        let unreachable = ConnectionConfiguration([("host", "127.0.0.1"), ("port", "1"), ("connect_timeout", "1")])
        let app = try await app(unreachable)
        try await app.test(.router) { client in
            try await client.execute(uri: "/readyz", method: .get) { response in
                #expect(response.status == .serviceUnavailable)
                #expect(response.headers[.retryAfter] == "1")
                let body = try JSONDecoder().decode(APIErrorBody.self, from: Data(buffer: response.body))
                #expect(body.error.code == "unavailable")
            }
        }
    }

    @Test("an unknown route answers 404")
    func unknownRoute() async throws {
        let app = try await app(try TestDatabase.configuration())
        try await app.test(.router) { client in
            try await client.execute(uri: "/nope", method: .get) { response in
                #expect(response.status == .notFound)
            }
        }
    }
}
