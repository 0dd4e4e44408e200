import Curl
import Foundation
import Postgres

/// Why a call to the App Store Server API gave no answer (docs/STORE.md, "When the store cannot
/// be asked"). Descriptions never carry the bearer token.
public enum AppStoreAPIError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Apple answered with an error: its HTTP status and, when the body carried them, Apple's
    /// `errorCode` and `errorMessage`.
    case api(status: Int, code: Int?, message: String?)
    /// Apple asked to wait (429, `4290000`) until `until` (its `Retry-After`, a UNIX time in
    /// milliseconds), further than the call may wait on its own.
    case rateLimited(until: Date)
    /// No answer: the connection failed.
    case transport(String)
    /// No answer within the request's timeout. Not retried at once: the endpoint pauses
    /// (``AppStoreServerAPI/timeoutPause``), as after a 429, and the caller goes on.
    case timedOut(String)
    /// An answer that is not the JSON its endpoint promises.
    case malformedAnswer(String)
    /// A request subsync refuses to send (a transaction id that is not one).
    case invalidArgument(String)
    /// The request could not be signed (a key the JWT library refuses).
    case signingFailed(String)

    /// Apple's error codes that mean "try again" (the API's documentation marks them retryable).
    public static let retryableCodes: Set<Int> = [4040002, 4040004, 4040006, 5000001]
    /// `TransactionIdNotFoundError`: the store has no such transaction. An answer, not a failure.
    public static let transactionNotFound = 4040010
    /// `RateLimitExceededError`.
    public static let rateLimitExceeded = 4290000

    /// Whether trying the same request again later may succeed.
    public var isRetryable: Bool {
        switch self {
        case .api(let status, let code, _):
            if let code, Self.retryableCodes.contains(code) { return true }
            return status >= 500 || status == 429
        case .rateLimited, .transport, .timedOut: return true
        case .malformedAnswer, .invalidArgument, .signingFailed: return false
        }
    }

    public var description: String {
        switch self {
        case .api(let status, let code, let message):
            "App Store Server API answered \(status)" + (code.map { " \($0)" } ?? "") + (message.map { ": \($0)" } ?? "")
        case .rateLimited(let until): "App Store Server API rate limit: retry after \(RFC3339.format(until))"
        case .transport(let reason): "App Store Server API unreachable: \(reason)"
        case .timedOut(let reason): "App Store Server API did not answer in time: \(reason)"
        case .malformedAnswer(let reason): "App Store Server API answer not understood: \(reason)"
        case .invalidArgument(let reason): "App Store Server API request refused: \(reason)"
        case .signingFailed(let reason): "App Store Server API request could not be signed: \(reason)"
        }
    }
}
