/// Why a transfer failed: there was no HTTP answer.
public enum CurlError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The URL does not parse, or its scheme is not http/https; or the request is malformed.
    case invalidURL(String)
    /// The connect-time address guard refused every address of the host; the message names the address.
    case addressNotAllowed(String)
    case couldNotResolve(String)
    /// Connection refused or the network/host unreachable.
    case couldNotConnect(String)
    /// The connect timeout or the total timeout expired.
    case timedOut(String)
    /// Kept for completeness: redirects are never followed, so this is not produced.
    case tooManyRedirects(String)
    /// The client was shut down before the transfer ended.
    case shutDown
    /// The request waited in the loop's queue past its `startBy`, and was not sent at all.
    case notStarted
    /// Any other libcurl failure (`code` is the `CURLcode`).
    case other(code: Int, message: String)

    public var description: String {
        switch self {
        case .invalidURL(let message): "invalid URL: \(message)"
        case .addressNotAllowed(let message): "address not allowed: \(message)"
        case .couldNotResolve(let message): "could not resolve: \(message)"
        case .couldNotConnect(let message): "could not connect: \(message)"
        case .timedOut(let message): "timed out: \(message)"
        case .tooManyRedirects(let message): "too many redirects: \(message)"
        case .shutDown: "the HTTP client was shut down"
        case .notStarted: "not sent: it could not start before its start-by time"
        case .other(let code, let message): "libcurl error \(code): \(message)"
        }
    }
}
