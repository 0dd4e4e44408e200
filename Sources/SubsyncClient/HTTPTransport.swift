import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One request to the service through URLSession, with the account token, JSON in and out.
struct HTTPTransport: Sendable {
    struct Answer: Sendable {
        var status: Int
        var body: Data
        /// `Retry-After`, in seconds, when present.
        var retryAfter: TimeInterval?
        /// The body as the service's `{"error": {"code", "message"}}`, read once (nil for a
        /// success, or a page that is not the service's, such as a proxy's).
        private let serviceError: ErrorAnswer.Detail?

        init(status: Int, body: Data, retryAfter: TimeInterval?) {
            self.status = status
            self.body = body
            self.retryAfter = retryAfter
            serviceError = (200..<300).contains(status) ? nil : (try? JSONDecoder().decode(ErrorAnswer.self, from: body))?.error
        }

        /// Whether the body is the service's `{"error": {"code", "message"}}` (not a proxy's page).
        var isServiceError: Bool { serviceError != nil }

        /// The `{"error": ...}` body's code and message, or the status alone.
        var error: (code: String, message: String) {
            serviceError.map { ($0.code, $0.message) } ?? ("http_\(status)", "HTTP \(status)")
        }
    }

    let configuration: SubsyncConfiguration

    /// Sends `method path` with `token`; an unreachable service is ``SubsyncClientError/unreachable(_:)``.
    func send(_ method: String, _ path: String, query: [URLQueryItem] = [], body: Data? = nil, token: String) async throws(SubsyncClientError) -> Answer {
        var components = URLComponents(url: configuration.baseURL.appendingPathComponent(path), resolvingAgainstBaseURL: false)
        if !query.isEmpty { components?.queryItems = query }
        guard let url = components?.url else { throw .invalidInput("cannot make a URL of \(configuration.baseURL) and \(path)") }
        var request = URLRequest(url: url, timeoutInterval: configuration.requestTimeout)
        request.httpMethod = method
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        if let body {
            request.httpBody = body
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        return try await answer(to: request, within: configuration.requestTimeout)
    }

    /// The answer to `request`, read whole within `seconds` or ``SubsyncClientError/unreachable(_:)``.
    /// URLRequest's own timeout is an idle one (each byte starts it again), so a server or proxy
    /// trickling an endless answer a byte at a time would hold the outbox for ever: here the
    /// whole exchange races a deadline, and the loser is cancelled (which cancels the URL
    /// session's task).
    private func answer(to request: URLRequest, within seconds: TimeInterval) async throws(SubsyncClientError) -> Answer {
        let limit = max(0, configuration.maximumAnswerBytes)
        let nanoseconds = UInt64((seconds.isFinite ? min(max(seconds, 0.001), 86_400) : 86_400) * 1_000_000_000)
        let outcome = await withTaskGroup(of: Result<Answer, SubsyncClientError>?.self) { group in
            group.addTask {
                do throws(SubsyncClientError) {
                    let (data, http) = try await boundedData(for: request, limit: limit)
                    let retryAfter = (http.value(forHTTPHeaderField: "Retry-After")).flatMap(Self.retryAfter)
                    return .success(Answer(status: http.statusCode, body: data, retryAfter: retryAfter))
                } catch {
                    return .failure(error)
                }
            }
            group.addTask {
                // Real time, like URLRequest's timeout: configuration.sleep is the outbox's waits.
                do { try await Task.sleep(nanoseconds: nanoseconds) } catch { return nil }
                return .failure(.unreachable("no whole answer within \(seconds) s (requestTimeout)"))
            }
            var first: Result<Answer, SubsyncClientError>?
            while first == nil, let next = await group.next() { first = next }
            group.cancelAll()
            return first
        }
        switch outcome {
        case .success(let answer): return answer
        case .failure(let error): throw error
        case nil: throw .unreachable("the request was cancelled")
        }
    }

    /// `Retry-After` as seconds (a number of seconds, or an HTTP date), bounded to 1 s – 6 h.
    static func retryAfter(_ text: String) -> TimeInterval? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if let seconds = Double(trimmed), seconds.isFinite, seconds >= 0 { return min(max(seconds, 1), 21_600) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: trimmed).map { min(max($0.timeIntervalSinceNow, 1), 21_600) }
    }
}
