import Foundation
import Hummingbird

extension Request {
    /// The body decoded as JSON (at most `limit` bytes): 400 `invalid_request` naming the field
    /// when it does not decode. An empty body decodes as `{}` when `emptyIsObject`, for routes
    /// whose every field is optional.
    func decodeJSON<T: Decodable>(
        _ type: T.Type, upTo limit: Int = 64 * 1024, emptyIsObject: Bool = false, context: SubsyncRequestContext
    ) async throws -> T {
        let body = try await collectBody(upTo: limit, context: context)
        let data = body.readableBytes == 0 && emptyIsObject ? Data("{}".utf8) : Data(buffer: body)
        do {
            return try JSONDecoder().decode(T.self, from: data)
        } catch let error as DecodingError {
            throw APIError(.badRequest, code: "invalid_request", message: error.fieldMessage)
        }
    }
}
