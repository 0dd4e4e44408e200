import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension HTTPTransport {
    /// An answer read through the app's own session, so its delegate (certificate pinning, a
    /// proxy's credentials) still applies, but never more than `limit` bytes of it. Past the
    /// limit, the request is cancelled and ``SubsyncClientError/answerTooLarge(limit:)``
    /// thrown; what was read is dropped.
    ///
    /// On Apple's systems the body is read as a stream (`bytes(for:)`), which stops at the limit.
    /// Linux's FoundationNetworking has no such stream, so there a task delegate counts the
    /// bytes as they arrive and cancels the task at the head (a `Content-Length` over the limit;
    /// FoundationNetworking ignores a `.cancel` disposition, so the task itself is cancelled) or
    /// as soon as the count passes it, and the answer is refused whatever its length. But
    /// FoundationNetworking reads ahead of its delegate without backpressure and buffers the body
    /// itself (and a redirect's body never reaches the delegate), so there the limit bounds what
    /// the client keeps and answers, not what the URL loading system reads; the request's
    /// deadline (``HTTPTransport/send(_:_:query:body:token:)``) bounds how long it reads
    /// (docs/CLIENT.md, *Answers*).
    func boundedData(for request: URLRequest, limit: Int) async throws(SubsyncClientError) -> (Data, HTTPURLResponse) {
        let session = configuration.session
        #if canImport(FoundationNetworking)
        let cap = AnswerCap(limit: limit)
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(for: request, delegate: cap)
        } catch {
            if cap.exceeded { throw .answerTooLarge(limit: limit) }
            throw .unreachable(error.localizedDescription)
        }
        guard !cap.exceeded, data.count <= limit else { throw .answerTooLarge(limit: limit) }
        guard let http = response as? HTTPURLResponse else { throw .unreachable("not an HTTP answer") }
        return (data, http)
        #else
        let bytes: URLSession.AsyncBytes
        let response: URLResponse
        do {
            (bytes, response) = try await session.bytes(for: request)
        } catch {
            throw .unreachable(error.localizedDescription)
        }
        guard let http = response as? HTTPURLResponse else {
            bytes.task.cancel()
            throw .unreachable("not an HTTP answer")
        }
        if http.expectedContentLength > Int64(limit) {
            bytes.task.cancel()
            throw .answerTooLarge(limit: limit)
        }
        var data = Data()
        // What the server announces sizes at most the first 64 KiB: the rest grows as it comes.
        data.reserveCapacity(Int(max(0, min(http.expectedContentLength, Int64(limit), 65_536))))
        do {
            for try await byte in bytes {
                guard data.count < limit else {
                    bytes.task.cancel()
                    throw SubsyncClientError.answerTooLarge(limit: limit)
                }
                data.append(byte)
            }
        } catch let error as SubsyncClientError {
            throw error
        } catch {
            throw .unreachable(error.localizedDescription)
        }
        return (data, http)
        #endif
    }
}

#if canImport(FoundationNetworking)
/// The task delegate that counts an answer's bytes on Linux and cancels its task past the limit
/// (see ``HTTPTransport/boundedData(for:limit:)``). It implements only the data callbacks, so
/// the session's own delegate still answers authentication challenges.
final class AnswerCap: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked: `received` and `over` are read and written only under `lock`; FoundationNetworking
    // calls the delegate from its own queue while the awaiting task reads `exceeded`.
    private let lock = NSLock()
    private var received = 0
    private var over = false
    let limit: Int

    init(limit: Int) {
        self.limit = limit
    }

    /// Whether the answer passed the limit (its head announced more, or more arrived).
    var exceeded: Bool { lock.withLock { over } }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        guard response.expectedContentLength > Int64(limit) else { return completionHandler(.allow) }
        lock.withLock { over = true }
        completionHandler(.cancel)
        // FoundationNetworking ignores the disposition of a task made by `data(for:delegate:)`.
        dataTask.cancel()
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let passed = lock.withLock { () -> Bool in
            received += data.count
            if received > limit { over = true }
            return over
        }
        if passed { dataTask.cancel() }
    }
}
#endif
