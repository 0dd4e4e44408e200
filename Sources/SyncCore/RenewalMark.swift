import Foundation

/// The renewal details that win for a transaction (and, across its transactions, for a
/// subscription), with the key of the report that carried them: greatest by (signed, signing
/// time, report order key). Signed details beat unsigned ones, a later signature beats an
/// earlier one, and the report key makes the order total, so "take the greatest" is a join.
///
/// It also keeps the auto-renew status and billing retry of that report, which a signed renewal
/// info sets: the resolver takes them from a signed mark rather than from the transaction's
/// representative report, so a device resending older renewal info with a genuine transaction
/// (and a later `observed_at`) cannot turn auto-renew back on.
public struct RenewalMark: Sendable, Hashable, Codable {
    public var details: RenewalDetails
    /// The order key of the report that carried ``details``.
    public var sourceReport: ReportOrderKey
    /// That report's `will_auto_renew` (a signed renewal info's `autoRenewStatus`).
    public var willAutoRenew: Bool?
    /// That report's `in_billing_retry` (a signed renewal info's `isInBillingRetryPeriod`).
    public var inBillingRetry: Bool

    public init(details: RenewalDetails, sourceReport: ReportOrderKey, willAutoRenew: Bool? = nil, inBillingRetry: Bool = false) {
        self.details = details
        self.sourceReport = sourceReport
        self.willAutoRenew = willAutoRenew
        self.inBillingRetry = inBillingRetry
    }

    /// The mark of `report`'s renewal details, `nil` when it has none.
    init?(_ report: Report, key: ReportOrderKey) {
        guard let details = report.renewal else { return nil }
        self.init(details: details, sourceReport: key, willAutoRenew: report.willAutoRenew, inBillingRetry: report.inBillingRetry)
    }

    /// Whether the details were signed by the App Store (not a development device's own fields).
    public var isSigned: Bool { details.signedAt != nil }

    /// Whether `self` comes after `other` in the (signed, signed at, report key) order.
    public func isAfter(_ other: RenewalMark) -> Bool {
        switch (details.signedAt, other.details.signedAt) {
        case (.some, nil): return true
        case (nil, .some): return false
        case (.some(let mine), .some(let theirs)) where mine != theirs: return mine > theirs
        default: return other.sourceReport < sourceReport
        }
    }

    /// The later of `a` and `b`.
    public static func latest(_ a: RenewalMark?, _ b: RenewalMark?) -> RenewalMark? {
        guard let a else { return b }
        guard let b else { return a }
        return b.isAfter(a) ? b : a
    }

    enum CodingKeys: String, CodingKey {
        case details
        case sourceReport = "source_report"
        case willAutoRenew = "will_auto_renew"
        case inBillingRetry = "in_billing_retry"
    }
}
