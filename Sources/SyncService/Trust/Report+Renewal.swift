import SyncCore

extension Report {
    /// Takes what StoreKit signs in a subscription's renewal info, not in its transactions:
    /// whether it auto-renews, whether the App Store is retrying a failed renewal, the end of the
    /// billing grace period, and the renewal details (why it ended, what it renews to, a price
    /// increase, the next renewal date) as of the renewal info's `signedDate`. The caller checks
    /// that `renewal` verified and is of this report's purchase.
    mutating func apply(_ renewal: JWSRenewalInfoPayload) {
        willAutoRenew = renewal.autoRenewStatus.map { $0 == 1 }
        inBillingRetry = renewal.isInBillingRetryPeriod ?? false
        gracePeriodExpiresAt = renewal.gracePeriodExpiresDate
        self.renewal = RenewalDetails(
            expirationReason: renewal.expirationIntent.map(ExpirationReason.init(intent:)),
            renewalProductID: renewal.autoRenewProductId,
            priceIncreaseStatus: renewal.priceIncreaseStatus.flatMap(PriceIncreaseStatus.init(code:)),
            renewalDate: renewal.renewalDate,
            signedAt: renewal.signedDate)
    }
}
