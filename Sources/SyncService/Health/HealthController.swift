import Foundation
import Hummingbird
import Postgres
import NIOConcurrencyHelpers
import SyncCore

/// `GET /healthz` (the process is up) and `GET /readyz` (the database answers).
///
/// Neither takes a credential, so both are limited per source address (`limiter`,
/// `SUBSYNC_RATE_LIMIT_PROBES`): a refused probe is answered 429 and its connection closed, so
/// sockets kept open by probing cannot hold connection slots (docs/SECURITY.md, "One host cannot
/// take every connection").
struct HealthController: Sendable {
    let pool: ConnectionPool
    let clock: any ServiceClock
    let limiter: RateLimiter?
    let proxies: TrustedProxies

    func addRoutes(to router: Router<SubsyncRequestContext>) {
        router.get("healthz") { request, context in
            try await admit(request, context)
            return Self.json(["status": "ok"])
        }
        router.get("readyz") { request, context in
            try await admit(request, context)
            return try await ready()
        }
    }

    /// Refuses a probe over its source's limit with 429, closing the connection after the answer.
    private func admit(_ request: Request, _ context: SubsyncRequestContext) async throws {
        guard let limiter, let wait = await limiter.take(context.clientAddress(of: request, trusting: proxies)) else { return }
        var refusal = APIError.rateLimited(retryAfter: wait, what: "health probes from this address")
        refusal.headers[.connection] = "close"
        context.closeAfterAnswer()
        throw refusal
    }

    private func ready() async throws -> Response {
        do {
            _ = try await firstOf(deadline: .seconds(2), clock: clock) { [pool] in
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
