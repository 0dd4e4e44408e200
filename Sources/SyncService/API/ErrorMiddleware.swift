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
///
/// An answer given before the handler read the request's body (a refusal on the head: 401, 404,
/// 413 on `Content-Length`, 429) reads and throws away the body after it is written, within
/// ``RequestBodies/discardLimit`` (see ``RequestBodies``): otherwise a `Connection: close` client's
/// unread body would hold its connection open until the idle timeout.
struct ErrorMiddleware: RouterMiddleware {
    typealias Context = SubsyncRequestContext
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let response: Response
        do {
            response = try await next(request, context)
        } catch {
            let refusal = apiError(for: error, request: request)
            guard Self.leavesBodyUnread(request, context: context) else { throw refusal }
            return Self.discardingBody(try refusal.response(from: request, context: context), of: request, context: context)
        }
        return Self.leavesBodyUnread(request, context: context) ? Self.discardingBody(response, of: request, context: context) : response
    }

    static func leavesBodyUnread(_ request: Request, context: Context) -> Bool {
        request.declaresBody && !context.bodyReading.hasStarted
    }

    /// `response`, followed (once written) by reading what is left of the request's body into
    /// nowhere; past ``RequestBodies/discardLimit`` the connection's reading side is closed.
    static func discardingBody(_ response: Response, of request: Request, context: Context) -> Response {
        var response = response
        if (request.declaredBodyLength ?? 0) > RequestBodies.discardLimit { response.headers[.connection] = "close" }
        let answer = response.body
        let body = request.body
        let channel = context.channel
        response.body = ResponseBody(contentLength: answer.contentLength) { writer in
            let answer = answer
            try await answer.write(writer)
            var iterator = body.makeAsyncIterator()
            if await !RequestBodies.discard(&iterator, upTo: RequestBodies.discardLimit) {
                channel.close(mode: .input, promise: nil)
            }
        }
        return response
    }

    func apiError(for error: any Error, request: Request) -> APIError {
        switch error {
        case let error as APIError:
            return error
        case let error as HTTPError:
            return APIError(error.status, code: Self.code(for: error.status), message: error.body ?? error.status.reasonPhrase)
        case is NIOTooManyBytesError:
            return APIError(.contentTooLarge, code: "body_too_large", message: "the body is larger than the limit of this endpoint")
        case _ where Self.isParserError(error):
            logger.debug("malformed request body", metadata: ["error": "\(error)", "path": "\(request.uri.path)"])
            return APIError(.badRequest, code: "invalid_request", message: "the request body ended early or was malformed")
        case let error as PostgresError where error.isTransient:
            logger.warning("database unavailable", metadata: ["error": "\(error)", "path": "\(request.uri.path)"])
            return APIError.unavailable("the database is unavailable; retry shortly", retryAfterSeconds: 2)
        default:
            logger.error("request failed", metadata: ["error": "\(error)", "path": "\(request.uri.path)"])
            return APIError(.internalServerError, code: "internal", message: "internal error")
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
