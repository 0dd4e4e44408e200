import Foundation

/// A verified webhook delivery: the body `{"type", "timestamp", "data"}` with the event as
/// ``event``.
///
/// Decoding a body alone (without ``WebhookVerifier``) takes ``id`` from the event; the
/// verifier sets it from the `webhook-id` header, which subsync makes the event's id.
public struct WebhookDelivery: Sendable, Hashable, Codable {
    /// The `webhook-id`: the event's id, stable across retries (use it to drop repeats).
    public var id: String
    /// When the event occurred (the body's `timestamp`).
    public var timestamp: Date
    /// The event's type (the body's `type`).
    public var type: WebhookEventType
    /// The event (the body's `data`).
    public var event: WebhookEvent

    /// A delivery with the given fields.
    public init(id: String, timestamp: Date, type: WebhookEventType, event: WebhookEvent) {
        self.id = id
        self.timestamp = timestamp
        self.type = type
        self.event = event
    }

    /// The JSON keys of the body.
    public enum CodingKeys: String, CodingKey {
        case type, timestamp
        case event = "data"
    }

    /// Decodes a delivery body; ``id`` is the event's id.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        type = try c.decode(WebhookEventType.self, forKey: .type)
        timestamp = try c.decodeRFC3339(forKey: .timestamp)
        event = try c.decode(WebhookEvent.self, forKey: .event)
        id = event.id
    }

    /// Encodes the body (``id`` is not part of it: it travels in the `webhook-id` header).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(type, forKey: .type)
        try c.encodeRFC3339(timestamp, forKey: .timestamp)
        try c.encode(event, forKey: .event)
    }
}
