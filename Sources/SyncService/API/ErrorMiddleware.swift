import Foundation
import Hummingbird
import Logging
import NIOCore
import Postgres

/// Gives every failure the JSON error shape and the right status:
/// - ``APIError``: as thrown (client mistakes are 4xx);
/// - Hummingbird's `HTTPError` (e.g. 413 from a capped body): same status, JSON body;
/// - a body the client broke off or framed wrongly (the parser's error while the handler reads
///   it, e.g. a Content-Length longer than what was sent): 400 `invalid_request`, not a 500;
/// - a lost or unreachable database, a pool that stayed busy, or contention (deadlock,
///   serialization failure, lock or statement timeout): 503 with `Retry-After`, so clients
///   retry instead of seeing an internal error;
/// - anything else: 500 `internal`, logged with its (log-safe) description.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            throw error
        } catch let error as HTTPError {
            throw APIError(error.status, code: Self.code(for: error.status), message: error.body ?? error.status.reasonPhrase)
        } catch is NIOTooManyBytesError {
            throw APIError(.contentTooLarge, code: "body_too_large", message: "the body is larger than the limit of this endpoint")
        } catch where Self.isParserError(error) {
            logger.debug("malformed request body", metadata: ["error": "\(error)", "path": "\(request.uri.path)"])
            throw APIError(.badRequest, code: "invalid_request", message: "the request body ended early or was malformed")
        } catch let error as PostgresError where error.isConnectionLoss || error.kind == .poolTimeout || error.kind == .closed
            || error.sqlState?.isTransient == true || error.sqlState == .lockNotAvailable || error.sqlState == .queryCanceled
        {
            logger.warning("database unavailable", metadata: ["error": "\(error)", "path": "\(request.uri.path)"])
            throw APIError.unavailable("the database is unavailable; retry shortly", retryAfterSeconds: 2)
        } catch {
            logger.error("request failed", metadata: ["error": "\(error)", "path": "\(request.uri.path)"])
            throw APIError(.internalServerError, code: "internal", message: "internal error")
        }
    }

    /// NIOHTTP1's `HTTPParserError`, thrown into the body stream when the client's framing is
    /// wrong (matched by name: SyncService does not depend on NIOHTTP1 itself).
    static func isParserError(_ error: any Error) -> Bool {
        String(reflecting: type(of: error)).hasSuffix(".HTTPParserError")
    }

    static func code(for status: HTTPResponse.Status) -> String {
        switch status {
        case .contentTooLarge: "body_too_large"
        case .notFound: "not_found"
        case .methodNotAllowed: "method_not_allowed"
        case .unsupportedMediaType: "unsupported_media_type"
        default: status.code < 500 ? "invalid_request" : "internal"
        }
    }
}
