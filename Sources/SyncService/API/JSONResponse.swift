import Foundation
import HTTPTypes
import Hummingbird
import Postgres

/// Encodes API bodies: snake_case keys come from each type's CodingKeys, dates are RFC 3339
/// with microseconds, keys are sorted so answers are stable (``PostgresJSONEncoder``, which writes
/// what `JSONEncoder.postgres` would, faster).
enum JSONResponse {
    static func make(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        let data = try PostgresJSONEncoder.encode(value)
        return Response(
            status: status,
            headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: data))
        )
    }
}
