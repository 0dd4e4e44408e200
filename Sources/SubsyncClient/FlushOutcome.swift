import Foundation

/// What sending the outbox came to.
public enum FlushOutcome: Sendable, Hashable {
    /// Everything waiting was delivered (or refused for good, see ``SubsyncClient/errors``):
    /// the outbox is empty. `delivered` counts the items the service took this time.
    case delivered(Int)
    /// The service asked to wait (429 or 503 with `Retry-After`); nothing is sent before `until`.
    case waiting(until: Date, delivered: Int)
    /// Sending stopped at a failure that a later attempt may not have (offline, a 5xx, a refused
    /// credential); the items wait in the outbox.
    case failed(SubsyncClientError, delivered: Int)
}
