/// How a product grants access (docs/RESOLUTION.md, "Per entitlement").
public enum ProductKind: String, Sendable, Hashable, Codable, CaseIterable {
    /// A subscription; access lasts until `max(expires_at, grace_period_expires_at)` as reported.
    case autoRenewable = "auto_renewable"
    /// A fixed-length pass with a catalogue `duration`; purchases of one entitlement stack.
    case nonRenewing = "non_renewing"
    /// A one-time purchase that never ends (lifetime).
    case nonConsumable = "non_consumable"
    /// Used up on purchase (e.g. call credits); never grants an entitlement.
    case consumable
}
