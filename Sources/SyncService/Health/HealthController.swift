import Foundation
import Hummingbird
import Postgres
import NIOConcurrencyHelpers
import SyncCore

/// `GET /healthz` (the process is up) and `GET /readyz` (the database answers).
///
/// Neither takes a credential, so neither may cost much or hold anything (docs/SECURITY.md, "One
/// host cannot take every connection"): each answer closes its connection, so probing never keeps
/// a socket open, and `/readyz` asks the database at most once a second however many probes come
/// (``ReadinessCheck``). No bucket limits them: a bucket per address would let a flood from the
/// health checker's own address (a NAT, a node) make the checker see the service down.
struct HealthController: Sendable {
    let readiness: ReadinessCheck

    init(pool: ConnectionPool, clock: any ServiceClock) {
        self.readiness = ReadinessCheck(pool: pool, clock: clock)
    }

    func addRoutes(to router: Router<SubsyncRequestContext>) {
        router.get("healthz") { _, context in
            context.closeAfterAnswer()
            return Self.json(["status": "ok"])
        }
        router.get("readyz") { _, context in
            context.closeAfterAnswer()
            guard await readiness.isReady() else {
                // The error itself may name hosts; the log has it, the client gets a stable code.
                var refusal = APIError.unavailable("database unreachable")
                refusal.headers[.connection] = "close"
                throw refusal
            }
            return Self.json(["status": "ready", "database": "ok"])
        }
    }

    static func json(_ body: [String: String]) -> Response {
        let data = (try? JSONEncoder().encode(body)) ?? Data("{}".utf8)
        return Response(
            status: .ok,
            headers: [.contentType: "application/json; charset=utf-8", .connection: "close"],
            body: .init(byteBuffer: ByteBuffer(bytes: data))
        )
    }
}

/// Whether the database answers `SELECT 1` within 2 s, asked at most once a second: probes in
/// the same second share the answer (and one question in flight), so a flood of `/readyz` costs
/// the database nothing more.
actor ReadinessCheck {
    let pool: ConnectionPool
    let clock: any ServiceClock
    private var last: (at: Duration, ready: Bool)?
    private var asking: Task<Bool, Never>?

    init(pool: ConnectionPool, clock: any ServiceClock) {
        self.pool = pool
        self.clock = clock
    }

    func isReady() async -> Bool {
        if let last, clock.uptime() - last.at < .seconds(1) { return last.ready }
        if let asking { return await asking.value }
        let task = Task { [pool, clock] in
            (try? await firstOf(deadline: .seconds(2), clock: clock) { try await pool.query("SELECT 1").count }) != nil
        }
        asking = task
        let ready = await task.value
        asking = nil
        last = (clock.uptime(), ready)
        return ready
    }
}

/// The result of `body`, or `CancellationError` once `deadline` has passed on `clock`, whichever
/// comes first; unlike a task group, it does not wait for `body` to finish. A statement stuck on
/// a database that does not answer goes on in the background (until the connection's answer
/// timeout closes it) while the caller already has its answer.
func firstOf<T: Sendable>(
    deadline: Duration, clock: any ServiceClock, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let outcome = ResumeOnce<T>()
    let finish = { @Sendable (result: Result<T, any Error>) in outcome.resume(with: result) }
    return try await withCheckedThrowingContinuation { continuation in
        outcome.set(continuation)
        let work = Task {
            do { finish(.success(try await body())) } catch { finish(.failure(error)) }
        }
        Task {
            try? await clock.sleep(for: deadline)
            finish(.failure(CancellationError()))
            work.cancel()
        }
    }
}

/// A continuation resumed by the first of several racers, and only once.
private final class ResumeOnce<T: Sendable>: Sendable {
    private let continuation = NIOLockedValueBox<CheckedContinuation<T, any Error>?>(nil)

    func set(_ continuation: CheckedContinuation<T, any Error>) {
        self.continuation.withLockedValue { $0 = continuation }
    }

    func resume(with result: Result<T, any Error>) {
        continuation.withLockedValue { continuation in
            continuation?.resume(with: result)
            continuation = nil
        }
    }
}
