import Foundation

/// A registered webhook endpoint (secrets are not part of this value; see ``EndpointStore``).
public struct WebhookEndpoint: Sendable, Codable, Equatable {
    public var id: UUID
    public var url: String
    public var description: String
    /// Event types delivered; nil means all.
    public var eventTypes: [String]?
    public var enabled: Bool
    public var disabledReason: String?
    /// Set when deliveries started failing; cleared by a success.
    public var failingSince: Date?
    /// While set and in the future, the previous secret also signs (after a rotation).
    public var previousSecretExpiresAt: Date?
    public var createdAt: Date
    public var updatedAt: Date
    /// Whether this process can open the endpoint's stored secrets (its current one, and the
    /// previous one while that still signs) with `SUBSYNC_SECRET_KEYS`. `false` after the key
    /// that sealed them was removed before `subsync endpoints reseal`: its deliveries are held
    /// (the others go out) until the key is back or the secret is rotated.
    public var secretReadable: Bool

    enum CodingKeys: String, CodingKey {
        case id
        case url
        case description
        case eventTypes = "event_types"
        case enabled
        case disabledReason = "disabled_reason"
        case failingSince = "failing_since"
        case previousSecretExpiresAt = "previous_secret_expires_at"
        case createdAt = "created_at"
        case updatedAt = "updated_at"
        case secretReadable = "secret_readable"
    }
}

/// An endpoint as the API and the CLI show it: its fields, plus `secret` only when it was just
/// created or rotated (the one time a secret is shown), and, when one endpoint is read, `audit`:
/// the latest changes operators made to it (``OperatorLog``).
public struct WebhookEndpointView: Encodable, Sendable {
    public var endpoint: WebhookEndpoint
    public var secret: WebhookSecret?
    public var audit: [OperatorLog.Action]?

    public init(_ endpoint: WebhookEndpoint, secret: WebhookSecret? = nil, audit: [OperatorLog.Action]? = nil) {
        self.endpoint = endpoint
        self.secret = secret
        self.audit = audit
    }

    enum CodingKeys: String, CodingKey {
        case secret, audit
    }

    public func encode(to encoder: any Encoder) throws {
        try endpoint.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(secret?.text, forKey: .secret)
        try container.encodeIfPresent(audit, forKey: .audit)
    }
}

/// The secret of an endpoint, in Standard Webhooks form: `whsec_` + base64 of the key bytes.
public struct WebhookSecret: Sendable, Equatable, CustomStringConvertible {
    public let text: String
    /// The raw HMAC key, decoded once (every delivery attempt signs with it).
    public let key: [UInt8]

    public init(text: String) {
        self.text = text
        if text.hasPrefix("whsec_"), let data = Data(base64Encoded: String(text.dropFirst(6))) {
            self.key = [UInt8](data)
        } else {
            self.key = Array(text.utf8)
        }
    }

    /// A new random secret of 32 bytes.
    public static func generate() -> WebhookSecret {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return WebhookSecret(text: "whsec_" + Data(bytes).base64EncodedString())
    }

    /// Never print a secret by accident.
    public var description: String { "whsec_***" }
}
