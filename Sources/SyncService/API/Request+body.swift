import Hummingbird
import NIOCore

/// How request bodies over a route's limit are refused without holding memory or connections.
///
/// - A body whose `Content-Length` is over the limit is refused on its head: nothing of it is
///   read or buffered, and the 413 is on its way before the client has sent it (a client that
///   reads while it sends, or waits on `Expect: 100-continue`, stops early). ``ErrorMiddleware``
///   then reads and throws away what the client still sends, at most ``discardLimit`` bytes, so a
///   keep-alive connection stays usable and a `Connection: close` one ends when the client is done.
/// - A body without a declared length (chunked) is buffered up to the limit, then the rest is
///   thrown away in the same way before the 413.
/// - Past ``discardLimit``, the connection's reading side is closed and the answer says
///   `Connection: close`: nobody can make the service read without end.
enum RequestBodies {
    /// The most a refused request's body is read (and thrown away) before its connection is closed.
    static let discardLimit = 8 << 20

    /// Reads and drops what is left of a body, at most `limit` bytes; whether it reached its end.
    static func discard<Iterator: AsyncIteratorProtocol>(_ iterator: inout Iterator, upTo limit: Int) async -> Bool
    where Iterator.Element == ByteBuffer {
        var discarded = 0
        do {
            while let part = try await iterator.next() {
                discarded += part.readableBytes
                if discarded > limit { return false }
            }
            return true
        } catch {
            // The client broke its framing off or went away: nothing more to read either way.
            return false
        }
    }

    /// The 413 for a body over `limit` bytes; `closing` when the connection is closed after it.
    static func tooLarge(limit: Int, closing: Bool) -> APIError {
        APIError(
            .contentTooLarge, code: "body_too_large", message: "the body is larger than the limit of this endpoint (\(limit) bytes)",
            headers: closing ? [.connection: "close"] : [:])
    }
}

extension Request {
    /// The body's length as the client declared it (`Content-Length`).
    var declaredBodyLength: Int? {
        headers[.contentLength].flatMap { Int($0) }
    }

    /// Whether the request carries a body: a positive `Content-Length`, or a chunked one.
    var declaresBody: Bool {
        (declaredBodyLength ?? 0) > 0 || headers[.transferEncoding]?.lowercased().contains("chunked") == true
    }

    /// The whole body, refused with 413 `body_too_large` when it is over `limit` bytes, without
    /// buffering more than `limit` (see ``RequestBodies``).
    func collectBody(upTo limit: Int, context: SubsyncRequestContext) async throws -> ByteBuffer {
        if let declared = declaredBodyLength, declared > limit {
            throw RequestBodies.tooLarge(limit: limit, closing: declared > RequestBodies.discardLimit)
        }
        context.bodyReading.start()
        var collected = ByteBuffer()
        var iterator = body.makeAsyncIterator()
        while let part = try await iterator.next() {
            guard collected.readableBytes + part.readableBytes <= limit else {
                collected = ByteBuffer()
                let complete = await RequestBodies.discard(&iterator, upTo: RequestBodies.discardLimit)
                if !complete { context.channel.close(mode: .input, promise: nil) }
                throw RequestBodies.tooLarge(limit: limit, closing: !complete)
            }
            collected.writeImmutableBuffer(part)
        }
        return collected
    }
}
