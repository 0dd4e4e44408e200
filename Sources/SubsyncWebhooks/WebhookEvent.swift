import Foundation

/// One event of an account (`data` of a delivery).
///
/// Events of an account are numbered 1, 2, 3, ... with no gap (``sequence``), and each carries
/// the account's full resolved state after it (``state``). Deliveries may arrive late, twice or
/// out of order: see ``EventOrderer``.
///
/// Values are normally decoded from a delivery by ``WebhookVerifier``; the memberwise
/// initializer is public for tests and for apps that store events.
public struct WebhookEvent: Sendable, Hashable, Codable, Identifiable {
    /// The event's id (a lowercase UUID), stable across delivery retries: the `webhook-id`.
    public var id: String
    /// The account the event belongs to.
    public var accountID: String
    /// The event's number in its account: 1, 2, 3, ... with no gap.
    public var sequence: Int64
    /// What happened.
    public var type: WebhookEventType
    /// When it happened.
    public var occurredAt: Date
    /// The entitlement concerned, for `entitlement.*` events.
    public var entitlementID: String?
    /// The entitlement's state before the event (`nil` when it had none).
    public var previous: WebhookEntitlement?
    /// The entitlement's state after the event.
    public var current: WebhookEntitlement?
    /// For `account.tier_changed`: the tier before.
    public var previousTier: String?
    /// The account's full resolved state after the event.
    public var state: WebhookAccountState
    /// For `entitlement.transferred`: which purchase moved between which accounts.
    public var transfer: WebhookTransfer?
    /// For `credits.granted` and `credits.revoked`: the ledger entry.
    public var credit: WebhookCredit?
    /// For `usage.low`, `usage.exhausted` and `usage.period_closed`: the meter's totals.
    public var usage: WebhookUsage?

    /// An event with the given fields.
    public init(
        id: String, accountID: String, sequence: Int64, type: WebhookEventType, occurredAt: Date,
        entitlementID: String? = nil, previous: WebhookEntitlement? = nil, current: WebhookEntitlement? = nil,
        previousTier: String? = nil, state: WebhookAccountState, transfer: WebhookTransfer? = nil,
        credit: WebhookCredit? = nil, usage: WebhookUsage? = nil
    ) {
        self.id = id
        self.accountID = accountID
        self.sequence = sequence
        self.type = type
        self.occurredAt = occurredAt
        self.entitlementID = entitlementID
        self.previous = previous
        self.current = current
        self.previousTier = previousTier
        self.state = state
        self.transfer = transfer
        self.credit = credit
        self.usage = usage
    }

    /// The JSON keys.
    public enum CodingKeys: String, CodingKey {
        case id
        case accountID = "account_id"
        case sequence, type
        case occurredAt = "occurred_at"
        case entitlementID = "entitlement_id"
        case previous, current
        case previousTier = "previous_tier"
        case state, transfer, credit, usage
    }

    /// Decodes `data`; dates are RFC 3339 with or without fractional seconds.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        accountID = try c.decode(String.self, forKey: .accountID)
        sequence = try c.decode(Int64.self, forKey: .sequence)
        type = try c.decode(WebhookEventType.self, forKey: .type)
        occurredAt = try c.decodeRFC3339(forKey: .occurredAt)
        entitlementID = try c.decodeIfPresent(String.self, forKey: .entitlementID)
        previous = try c.decodeIfPresent(WebhookEntitlement.self, forKey: .previous)
        current = try c.decodeIfPresent(WebhookEntitlement.self, forKey: .current)
        previousTier = try c.decodeIfPresent(String.self, forKey: .previousTier)
        state = try c.decode(WebhookAccountState.self, forKey: .state)
        transfer = try c.decodeIfPresent(WebhookTransfer.self, forKey: .transfer)
        credit = try c.decodeIfPresent(WebhookCredit.self, forKey: .credit)
        usage = try c.decodeIfPresent(WebhookUsage.self, forKey: .usage)
    }

    /// Encodes the documented shape: `null` for absent values, and `transfer`, `credit` and
    /// `usage` only when present.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(accountID, forKey: .accountID)
        try c.encode(sequence, forKey: .sequence)
        try c.encode(type, forKey: .type)
        try c.encodeRFC3339(occurredAt, forKey: .occurredAt)
        try c.encode(entitlementID, forKey: .entitlementID)
        try c.encode(previous, forKey: .previous)
        try c.encode(current, forKey: .current)
        try c.encode(previousTier, forKey: .previousTier)
        try c.encode(state, forKey: .state)
        try c.encodeIfPresent(transfer, forKey: .transfer)
        try c.encodeIfPresent(credit, forKey: .credit)
        try c.encodeIfPresent(usage, forKey: .usage)
    }
}
