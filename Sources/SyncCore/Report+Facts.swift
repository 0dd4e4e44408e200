import Foundation

extension Report {
    /// Every fact of this report that the per-transaction join reads (docs/RESOLUTION.md, "Per
    /// transaction: the join"), as text, in a fixed order: what a name made of the facts must
    /// cover, so that two reports under one such name cannot resolve differently. Left out: the
    /// report's own key and origin (report id, device, observed time, trust with its signing time,
    /// the renewal details' signing time) and the signed JWS text, which the join does not read.
    /// Times are whole milliseconds since 1970 (the App Store's precision), `-` when absent.
    public var joinFacts: [String] {
        func time(_ date: Date?) -> String { date.map { String(Int64(($0.timeIntervalSince1970 * 1000).rounded(.down))) } ?? "-" }
        func flag(_ value: Bool?) -> String { value.map { $0 ? "1" : "0" } ?? "-" }
        return [
            productID, originalTransactionID, transactionID, time(purchasedAt),
            time(expiresAt), time(gracePeriodExpiresAt), time(revokedAt), revocationReason?.rawValue ?? "-",
            flag(isUpgraded), flag(willAutoRenew), flag(inBillingRetry), environment?.rawValue ?? "-",
            renewal == nil ? "no-renewal" : "renewal",
            renewal?.expirationReason?.rawValue ?? "-", renewal?.renewalProductID ?? "-",
            renewal?.priceIncreaseStatus?.rawValue ?? "-", time(renewal?.renewalDate),
        ]
    }
}
