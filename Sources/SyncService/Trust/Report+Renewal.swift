import SyncCore

extension Report {
    /// Takes what StoreKit signs in a subscription's renewal info, not in its transactions:
    /// whether it auto-renews, whether the App Store is retrying a failed renewal, and the end
    /// of the billing grace period. The caller checks that `renewal` verified and is of this
    /// report's purchase.
    mutating func apply(_ renewal: JWSRenewalInfoPayload) {
        willAutoRenew = renewal.autoRenewStatus.map { $0 == 1 }
        inBillingRetry = renewal.isInBillingRetryPeriod ?? false
        gracePeriodExpiresAt = renewal.gracePeriodExpiresDate
    }
}
