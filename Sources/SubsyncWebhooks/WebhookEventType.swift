/// The kind of a webhook event: the `type` of the delivery and of its event.
///
/// A struct rather than an enum so that types added to subsync later still decode; compare with
/// the constants (`event.type == .renewed`, or `switch` with a `default` case), and use
/// ``isKnown`` to tell the types this library knows about.
public struct WebhookEventType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The wire string, such as `entitlement.activated`.
    public let rawValue: String

    /// The type whose wire string is `rawValue` (any string is accepted).
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// The type whose wire string is `rawValue` (any string is accepted).
    public init(_ rawValue: String) {
        self.rawValue = rawValue
    }

    /// Decodes the wire string.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        self.rawValue = try container.decode(String.self)
    }

    /// Encodes the wire string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    /// The wire string.
    public var description: String { rawValue }

    /// The entitlement started granting access (a first purchase, or a new one after `expired`
    /// or `revoked`).
    public static let activated = WebhookEventType(rawValue: "entitlement.activated")
    /// Still (or again) granting access and paid further: `period_ends_at` moved later.
    public static let renewed = WebhookEventType(rawValue: "entitlement.renewed")
    /// The entitlement became `expired`.
    public static let expired = WebhookEventType(rawValue: "entitlement.expired")
    /// The entitlement became `revoked` (a refund).
    public static let revoked = WebhookEventType(rawValue: "entitlement.revoked")
    /// A revocation was undone; `current` says whether access is back.
    public static let restored = WebhookEventType(rawValue: "entitlement.restored")
    /// The product changed while the subscription stayed alive (upgrade, downgrade, crossgrade).
    public static let productChanged = WebhookEventType(rawValue: "entitlement.product_changed")
    /// Billing failed and the store granted a grace period: access continues until its end.
    public static let gracePeriodStarted = WebhookEventType(rawValue: "entitlement.grace_period_started")
    /// Billing failed and there is no access while the store retries.
    public static let billingIssue = WebhookEventType(rawValue: "entitlement.billing_issue")
    /// `will_renew` changed while the subscription stayed alive.
    public static let renewalChanged = WebhookEventType(rawValue: "entitlement.renewal_changed")
    /// Any other change of an entitlement's state.
    public static let updated = WebhookEventType(rawValue: "entitlement.updated")
    /// A purchase moved between accounts; the event carries ``WebhookEvent/transfer``.
    public static let transferred = WebhookEventType(rawValue: "entitlement.transferred")
    /// The account's tier, features, limits or ads changed.
    public static let tierChanged = WebhookEventType(rawValue: "account.tier_changed")
    /// Units of a meter were granted; the event carries ``WebhookEvent/credit``.
    public static let creditsGranted = WebhookEventType(rawValue: "credits.granted")
    /// Units of a meter were taken back; the event carries ``WebhookEvent/credit``.
    public static let creditsRevoked = WebhookEventType(rawValue: "credits.revoked")
    /// What is left of a meter fell to its low threshold; the event carries ``WebhookEvent/usage``.
    public static let usageLow = WebhookEventType(rawValue: "usage.low")
    /// Allowance, rewards and credits of a meter are all spent; the event carries
    /// ``WebhookEvent/usage``.
    public static let usageExhausted = WebhookEventType(rawValue: "usage.exhausted")
    /// An allowance period with usage ended (or its totals changed: see
    /// ``WebhookUsage/revision``); the event carries ``WebhookEvent/usage``.
    public static let usagePeriodClosed = WebhookEventType(rawValue: "usage.period_closed")

    /// Every type this version of the library knows about.
    public static let allKnown: [WebhookEventType] = [
        .activated, .renewed, .expired, .revoked, .restored, .productChanged, .gracePeriodStarted,
        .billingIssue, .renewalChanged, .updated, .transferred, .tierChanged, .creditsGranted,
        .creditsRevoked, .usageLow, .usageExhausted, .usagePeriodClosed,
    ]

    /// Whether this is one of ``allKnown`` (false for types added to subsync later).
    public var isKnown: Bool { Self.allKnown.contains(self) }
}
