/// The kinds of events (docs/RESOLUTION.md, "Events"). Raw values are the wire `type` strings.
public enum EventType: String, Sendable, Hashable, Codable, CaseIterable {
    /// The entitlement started granting access (first purchase, or a new purchase after
    /// `expired` or `revoked`).
    case activated = "entitlement.activated"
    /// Still (or again, after billing retry) granting access, and paid further: `period_ends_at`
    /// moved later (a lifetime purchase counts as the latest possible).
    case renewed = "entitlement.renewed"
    /// Became `expired` (including first seen already expired, or upgraded away).
    case expired = "entitlement.expired"
    /// Became `revoked` (refund), from any other status or first seen revoked.
    case revoked = "entitlement.revoked"
    /// The revoked transaction is no longer revoked (refund reversal or operator unrevoke);
    /// `current` says whether access is back.
    case restored = "entitlement.restored"
    /// The source product changed while the subscription stayed alive (up/downgrade, crossgrade).
    case productChanged = "entitlement.product_changed"
    /// Entered `grace_period`: billing failed, access continues until the grace end.
    case gracePeriodStarted = "entitlement.grace_period_started"
    /// Entered `billing_retry`: billing failed and there is no access.
    case billingIssue = "entitlement.billing_issue"
    /// `will_renew` changed while the subscription stayed alive.
    case renewalChanged = "entitlement.renewal_changed"
    /// Any other change of an entitlement's state that no type above describes (e.g. the expiry
    /// moved earlier because one of two grants was refunded, or a grace period was extended), so
    /// that every change of the resolved state produces an event: the catch-all, last in
    /// docs/RESOLUTION.md, "Events".
    case updated = "entitlement.updated"
    /// A purchase moved between accounts under the `transfer` binding policy; written to both
    /// accounts, carrying ``Transfer``. The consequences (access lost or gained) follow as their
    /// own events.
    case transferred = "entitlement.transferred"
    /// The account's tier, features, limits or ads changed.
    case tierChanged = "account.tier_changed"
    /// Units of a meter were granted (once per source): a verified consumable purchase, a
    /// rewarded ad, or an operator's positive adjustment, carrying ``CreditChange``.
    case creditsGranted = "credits.granted"
    /// Units were taken back (even when already spent): a refunded consumable, or an operator's
    /// negative adjustment, carrying ``CreditChange``.
    case creditsRevoked = "credits.revoked"
    /// What is left of a meter fell to its `low_fraction` of the period's allowance, carrying
    /// ``UsageSnapshot`` (once per crossing; docs/USAGE.md).
    case usageLow = "usage.low"
    /// Allowance, rewards and credits of a meter are all spent: more usage is overage, and holds
    /// are refused (once per crossing).
    case usageExhausted = "usage.exhausted"
    /// An allowance period with usage ended: its totals and overage, for billing. Late usage that
    /// changes them sends it again with the next `revision`.
    case usagePeriodClosed = "usage.period_closed"
}
