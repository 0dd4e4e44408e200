import Foundation

/// What went wrong, as the client reports it: thrown by calls that need an answer now, and sent
/// on ``SubsyncClient/errors`` for what happens in the background.
public enum SubsyncClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The service refused an item for good (a signature it cannot verify, a purchase bound to
    /// another account, a usage id reused with other units, ...): no retry can fix it, so it
    /// left the outbox. `key` is the report id, usage id or hold id.
    case refused(kind: String, key: String, status: Int, code: String, message: String)
    /// The service did not accept the credential from the token provider.
    case unauthorized(status: Int, code: String, message: String)
    /// A file of the client's storage could not be read: it was moved aside (outbox items to
    /// `outbox/corrupt/`, the state to `state.json.corrupt`) and the client went on without it.
    case corruptFile(path: String, reason: String)
    /// The client's storage folder could not be written.
    case storage(path: String, reason: String)
    /// The service answered a direct call (a hold, a refresh) with an error.
    case service(status: Int, code: String, message: String)
    /// The service could not be reached (offline, refused, timed out).
    case unreachable(String)
    /// The service asks to wait (429, 503) until this moment.
    case retryLater(until: Date)
    /// The answer was longer than ``SubsyncConfiguration/maximumAnswerBytes``: the client stopped
    /// reading it (a service or proxy gone wrong must not exhaust the app's memory). Outbox items
    /// stay and are sent again later, as after an unreachable service.
    case answerTooLarge(limit: Int)
    /// Something the app passed cannot be sent (a purchase with neither a JWS nor fields).
    case invalidInput(String)

    public var description: String {
        switch self {
        case .refused(let kind, let key, let status, let code, let message):
            "the service refused \(kind) \(key) (\(status) \(code)): \(message); it left the outbox"
        case .unauthorized(let status, let code, let message): "the service refused the credential (\(status) \(code)): \(message)"
        case .corruptFile(let path, let reason): "\(path) could not be read (\(reason)); it was moved aside"
        case .storage(let path, let reason): "could not write \(path): \(reason)"
        case .service(let status, let code, let message): "the service answered \(status) \(code): \(message)"
        case .unreachable(let reason): "the service could not be reached: \(reason)"
        case .retryLater(let until): "the service asked to wait until \(WireFormat.format(until))"
        case .answerTooLarge(let limit): "the service's answer was longer than \(limit) bytes (maximumAnswerBytes); the client stopped reading it"
        case .invalidInput(let reason): reason
        }
    }
}
