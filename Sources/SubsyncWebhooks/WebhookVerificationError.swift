/// Why ``WebhookVerifier/verify(body:headers:now:)`` refused a delivery.
///
/// Answer a refused delivery with a 4xx status (subsync retries it later); descriptions never
/// contain secrets or signatures.
public enum WebhookVerificationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A required header (`webhook-id`, `webhook-timestamp` or `webhook-signature`) is absent or
    /// empty; the associated value is its lowercase name.
    case missingHeader(String)
    /// `webhook-timestamp` is not a Unix time in whole seconds.
    case invalidTimestamp
    /// `webhook-timestamp` is further from now than the tolerance: `seconds` is now minus the
    /// timestamp (positive: stale or replayed; negative: in the future).
    case timestampOutOfTolerance(seconds: Int)
    /// No `v1` signature matches any configured secret (tampered body, wrong secret, or not from
    /// subsync).
    case noMatchingSignature
    /// The signature is valid but the body is not a delivery this library understands.
    case malformedBody(String)

    /// A message for logs.
    public var description: String {
        switch self {
        case .missingHeader(let name):
            return "Webhook delivery refused: header '\(name)' is missing or empty."
        case .invalidTimestamp:
            return "Webhook delivery refused: 'webhook-timestamp' is not a Unix time in whole seconds."
        case .timestampOutOfTolerance(let seconds) where seconds >= 0:
            return "Webhook delivery refused: its timestamp is \(seconds.magnitude) s old, "
                + "beyond the tolerance (stale or replayed)."
        case .timestampOutOfTolerance(let seconds):
            return "Webhook delivery refused: its timestamp is \(seconds.magnitude) s in the future, "
                + "beyond the tolerance (check the clocks)."
        case .noMatchingSignature:
            return "Webhook delivery refused: no signature matches a configured secret."
        case .malformedBody(let reason):
            return "Webhook delivery refused: the signed body could not be decoded: \(reason)"
        }
    }
}
