import Foundation
import HTTPTypes
import Hummingbird

/// An error answered to a client as `{"error": {"code": ..., "message": ...}}`.
///
/// `code` is a stable machine-readable string (documented in openapi.yaml); `message` is for
/// people and never contains secrets.
public struct APIError: HTTPResponseError, Sendable {
    public var status: HTTPResponse.Status
    public var code: String
    public var message: String
    public var headers: HTTPFields

    public init(_ status: HTTPResponse.Status, code: String, message: String, headers: HTTPFields = [:]) {
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        let data = try JSONEncoder().encode(APIErrorBody(error: .init(code: code, message: message)))
        var headers = self.headers
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    public static func notFound(_ message: String = "no such resource") -> APIError {
        APIError(.notFound, code: "not_found", message: message)
    }

    public static func unavailable(_ message: String, retryAfterSeconds: Int = 1) -> APIError {
        APIError(.serviceUnavailable, code: "unavailable", message: message, headers: [.retryAfter: String(retryAfterSeconds)])
    }
}

/// The wire form of an error response.
public struct APIErrorBody: Codable, Sendable, Equatable {
    public struct Detail: Codable, Sendable, Equatable {
        public var code: String
        public var message: String
    }

    public var error: Detail
}
