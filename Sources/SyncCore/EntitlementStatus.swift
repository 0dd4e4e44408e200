/// The status of an entitlement at an instant `now`, decided by its *source* grant (the grant
/// with the latest access end; see ``Resolver``). With `period end` the source's paid-through
/// instant (`expires_at` of an auto-renewable, the stacked end of a non-renewing pass) and
/// `access end` = max(period end, grace_period_expires_at):
///
/// | status          | when                                                                   | access |
/// |-----------------|------------------------------------------------------------------------|--------|
/// | `active`        | now < period end, or the source is a lifetime purchase                 | yes    |
/// | `grace_period`  | period end ≤ now < access end (billing failed, the store granted grace) | yes    |
/// | `billing_retry` | now ≥ access end and the source auto-renewable is `in_billing_retry`    | **no** |
/// | `expired`       | now ≥ access end otherwise, or every transaction was upgraded away     | no     |
/// | `revoked`       | no grant gives access and the latest transaction (by purchase) is revoked | no  |
///
/// As in StoreKit, billing retry without grace means no access; `in_billing_retry` before the
/// period end does not matter (the subscription is still paid for).
public enum EntitlementStatus: String, Sendable, Hashable, Codable, CaseIterable {
    case active
    case gracePeriod = "grace_period"
    case billingRetry = "billing_retry"
    case expired
    case revoked

    /// Whether this status gives access to the entitlement's tier (`active` or `grace_period`).
    public var grantsAccess: Bool {
        self == .active || self == .gracePeriod
    }

    /// Whether the subscription is still alive: it grants access or the store is still trying to
    /// collect (`billing_retry`). Product and auto-renew changes are only reported while alive.
    public var isAlive: Bool {
        grantsAccess || self == .billingRetry
    }
}
