/// The ledger entry a `credits.granted` or `credits.revoked` event reports (`data.credit`).
public struct WebhookCredit: Sendable, Hashable, Codable {
    /// The meter the units belong to (such as `minutes`).
    public var meter: String
    /// The units granted or taken back, always positive: the event type says which way.
    public var units: Int
    /// Where the units came from: `consumable` (a pack, or its refund), `reward` (a rewarded
    /// ad) or `adjustment` (an operator's). Other values may be added later.
    public var source: String
    /// The store's transaction of a pack, the ad network's of a reward; `nil` for an adjustment.
    public var transactionID: String?
    /// The ledger entry's id.
    public var entryID: String
    /// Who made an adjustment (`nil` for other sources).
    public var actor: String?
    /// Why an adjustment was made (`nil` for other sources).
    public var reason: String?

    /// A credit entry with the given fields.
    public init(
        meter: String, units: Int, source: String, transactionID: String?, entryID: String,
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

    /// The JSON keys.
    public enum CodingKeys: String, CodingKey {
        case meter, units, source, actor, reason
        case transactionID = "transaction_id"
        case entryID = "entry_id"
    }

    /// Decodes `data.credit`; a missing `source` (events older than rewards and adjustments)
    /// is `consumable`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        meter = try c.decode(String.self, forKey: .meter)
        units = try c.decode(Int.self, forKey: .units)
        source = try c.decodeIfPresent(String.self, forKey: .source) ?? "consumable"
        transactionID = try c.decodeIfPresent(String.self, forKey: .transactionID)
        entryID = try c.decode(String.self, forKey: .entryID)
        actor = try c.decodeIfPresent(String.self, forKey: .actor)
        reason = try c.decodeIfPresent(String.self, forKey: .reason)
    }

    /// Encodes every key, `null` where a value is absent.
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
