import Foundation
import Hummingbird
import Postgres

/// `GET /healthz` (the process is up) and `GET /readyz` (the database answers).
struct HealthController: Sendable {
    let pool: ConnectionPool

    func addRoutes(to router: Router<some RequestContext>) {
        router.get("healthz") { _, _ in
            Self.json(["status": "ok"])
        }
        router.get("readyz") { _, _ in
            try await ready()
        }
    }

    private func ready() async throws -> Response {
        do {
            _ = try await withTimeout(.seconds(2)) {
                try await pool.query("SELECT 1")
            }
            return Self.json(["status": "ready", "database": "ok"])
        } catch {
            // The error itself may name hosts; the log has it, the client gets a stable code.
            throw APIError.unavailable("database unreachable")
        }
    }

    static func json(_ body: [String: String]) -> Response {
        let data = (try? JSONEncoder().encode(body)) ?? Data("{}".utf8)
        return Response(
            status: .ok,
            headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: data))
        )
    }
}

/// Runs `body`, throwing `CancellationError` if it takes longer than `timeout`.
func withTimeout<T: Sendable>(_ timeout: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw CancellationError()
        }
        defer { group.cancelAll() }
        guard let first = try await group.next() else { throw CancellationError() }
        return first
    }
}
