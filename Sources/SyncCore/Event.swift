import Foundation

/// A stored event, as delivered to webhooks and read through the API (docs/WEBHOOKS.md, "The request").
///
/// JSON: `id`, `account_id`, `sequence` (1, 2, 3, ... per account, no gaps), `type`,
/// `occurred_at`, `entitlement_id`, `previous`, `current`, `previous_tier`, `state`
/// (absent values written as `null`).
public struct Event: Sendable, Hashable, Codable, Identifiable {
    /// Unique, stable across delivery retries (the `webhook-id`). Assigned by the store.
    public var id: String
    public var accountID: String
    /// Per-account sequence number, assigned by the store.
    public var sequence: Int64
    public var type: EventType
    public var occurredAt: Date
    public var entitlementID: String?
    public var previous: EntitlementState?
    public var current: EntitlementState?
    public var previousTier: String?
    /// The account's full resolved state after the change.
    public var state: AccountState
    /// For `entitlement.transferred`: which purchase moved, from which account to which.
    public var transfer: Transfer?
    /// For `credits.granted` / `credits.revoked`: the ledger entry written.
    public var credit: CreditChange?
    /// For `usage.low`, `usage.exhausted` and `usage.period_closed`: the meter's totals.
    public var usage: UsageSnapshot?

    public init(
        id: String, accountID: String, sequence: Int64, type: EventType, occurredAt: Date,
        entitlementID: String?, previous: EntitlementState?, current: EntitlementState?,
        previousTier: String?, state: AccountState, transfer: Transfer? = nil, credit: CreditChange? = nil,
        usage: UsageSnapshot? = nil
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

    /// The stored form of `draft`, with the identity the store assigned.
    public init(draft: EventDraft, id: String, accountID: String, sequence: Int64, occurredAt: Date) {
        self.init(
            id: id, accountID: accountID, sequence: sequence, type: draft.type, occurredAt: occurredAt,
            entitlementID: draft.entitlementID, previous: draft.previous, current: draft.current,
            previousTier: draft.previousTier, state: draft.state)
    }

    public enum CodingKeys: String, CodingKey {
        case id
        case accountID = "account_id"
        case sequence, type
        case occurredAt = "occurred_at"
        case entitlementID = "entitlement_id"
        case previous, current
        case previousTier = "previous_tier"
        case state
        case transfer
        case credit
        case usage
    }

    public func encode(to encoder: any Encoder) throws {
        try encode(to: encoder, state: state)
    }

    /// Encodes this event with `state` in place of ``state``: the same keys in the same order.
    /// A store that wrote the account's state already passes that encoding, so the state of an
    /// account's several events is not encoded again for each.
    public func encode(to encoder: any Encoder, state: some Encodable) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(accountID, forKey: .accountID)
        try c.encode(sequence, forKey: .sequence)
        try c.encode(type, forKey: .type)
        try c.encode(occurredAt, forKey: .occurredAt)
        try c.encode(entitlementID, forKey: .entitlementID)
        try c.encode(previous, forKey: .previous)
        try c.encode(current, forKey: .current)
        try c.encode(previousTier, forKey: .previousTier)
        try c.encode(state, forKey: .state)
        // Only transfer events carry it, so every other payload keeps its documented shape.
        try c.encodeIfPresent(transfer, forKey: .transfer)
        try c.encodeIfPresent(credit, forKey: .credit)
        try c.encodeIfPresent(usage, forKey: .usage)
    }
}

/// The purchase an `entitlement.transferred` event moved between accounts (the `transfer`
/// binding policy, docs/STOREKIT.md).
public struct Transfer: Sendable, Hashable, Codable {
    /// The store's original transaction id: the purchase and all its renewals.
    public var originalTransactionID: String
    /// The account that had it.
    public var fromAccountID: String
    /// The account that has it now.
    public var toAccountID: String

    public init(originalTransactionID: String, fromAccountID: String, toAccountID: String) {
        self.originalTransactionID = originalTransactionID
        self.fromAccountID = fromAccountID
        self.toAccountID = toAccountID
    }

    public enum CodingKeys: String, CodingKey {
        case originalTransactionID = "original_transaction_id"
        case fromAccountID = "from_account_id"
        case toAccountID = "to_account_id"
    }
}

/// The ledger entry a `credits.granted` or `credits.revoked` event reports (docs/USAGE.md).
public struct CreditChange: Sendable, Hashable, Codable {
    /// Where the units came from.
    public enum Source: String, Sendable, Hashable, Codable {
        /// A consumable purchase (a minute pack), or its refund.
        case consumable
        /// A verified rewarded ad.
        case reward
        /// An operator's `subsync credits adjust`.
        case adjustment
    }

    public var meter: String
    /// The units granted or taken back (always positive; the type says which).
    public var units: Int
    public var source: Source
    /// The store's transaction of a consumable, the ad network's of a reward; `nil` for an
    /// adjustment.
    public var transactionID: String?
    public var entryID: String
    /// Who made an adjustment, and why (`nil` for the other sources).
    public var actor: String?
    public var reason: String?

    public init(
        meter: String, units: Int, source: Source = .consumable, transactionID: String?, entryID: String,
        actor: String? = nil, reason: String? = nil
    ) {
        self.meter = meter
        self.units = units
        self.source = source
        self.transactionID = transactionID
        self.entryID = entryID
        self.actor = actor
        self.reason = reason
    }

    enum CodingKeys: String, CodingKey {
        case meter, units, source, actor, reason
        case transactionID = "transaction_id"
        case entryID = "entry_id"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        meter = try c.decode(String.self, forKey: .meter)
        units = try c.decode(Int.self, forKey: .units)
        // Events stored before rewards and adjustments had events are all consumables'.
        source = try c.decodeIfPresent(Source.self, forKey: .source) ?? .consumable
        transactionID = try c.decodeIfPresent(String.self, forKey: .transactionID)
        entryID = try c.decode(String.self, forKey: .entryID)
        actor = try c.decodeIfPresent(String.self, forKey: .actor)
        reason = try c.decodeIfPresent(String.self, forKey: .reason)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(meter, forKey: .meter)
        try c.encode(units, forKey: .units)
        try c.encode(source, forKey: .source)
        try c.encode(transactionID, forKey: .transactionID)
        try c.encode(entryID, forKey: .entryID)
        try c.encode(actor, forKey: .actor)
        try c.encode(reason, forKey: .reason)
    }
}
