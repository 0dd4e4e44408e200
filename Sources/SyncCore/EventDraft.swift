import Foundation

/// An event derived from a change of an account's resolved state, before the store gives it an
/// id, a sequence number and an `occurred_at` (see ``Event``).
public struct EventDraft: Sendable, Hashable {
    public var type: EventType
    /// The entitlement concerned; `nil` for account-level events (`account.tier_changed`).
    public var entitlementID: String?
    /// The entitlement before the change (`nil` if the account had none for it).
    public var previous: EntitlementState?
    /// The entitlement after the change.
    public var current: EntitlementState?
    /// For `account.tier_changed`: the tier before (`nil` when there was no previous state).
    public var previousTier: String?
    /// The account's full resolved state after the change.
    public var state: AccountState
    /// The resolution time that detected the change (a natural `occurred_at`).
    public var detectedAt: Date

    public init(
        type: EventType, entitlementID: String?, previous: EntitlementState?, current: EntitlementState?,
        previousTier: String? = nil, state: AccountState, detectedAt: Date
    ) {
        self.type = type
        self.entitlementID = entitlementID
        self.previous = previous
        self.current = current
        self.previousTier = previousTier
        self.state = state
        self.detectedAt = detectedAt
    }
}
