import Foundation
import Postgres
import SyncCore

extension TransactionAggregate: JSONReadable {
    /// What `init(from:)` decodes: optionals absent or `null` are `nil` (an absent
    /// `operator_lifts_store_before` is the latest unrevoke's time).
    public init(json reader: inout JSONReader) throws {
        var transactionID: String?, originalTransactionID: String?, productID: String?, purchasedAt: Date?
        var expiresAt: Date?, gracePeriodExpiresAt: Date?, storeRevocation: RevocationMark?, storeReinstatedAt: Date?
        var operatorRevocation: RevocationMark?, operatorReinstatedAt: Date?, operatorLiftsStoreBefore: Date??
        var isUpgraded: Bool?, willAutoRenew: Bool?, inBillingRetry: Bool?, environment: StoreEnvironment?
        var representative: ReportOrderKey?, firstObservedAt: Date?, lastObservedAt: Date?
        var renewal: RenewalMark?
        try reader.object { r, key in
            if key == "transaction_id" {
                transactionID = try r.string()
            } else if key == "original_transaction_id" {
                originalTransactionID = try r.string()
            } else if key == "product_id" {
                productID = try r.string()
            } else if key == "purchased_at" {
                purchasedAt = try r.date()
            } else if key == "expires_at" {
                expiresAt = r.null() ? nil : try r.date()
            } else if key == "grace_period_expires_at" {
                gracePeriodExpiresAt = r.null() ? nil : try r.date()
            } else if key == "revocation" {
                storeRevocation = r.null() ? nil : try RevocationMark(json: &r)
            } else if key == "latest_reinstated_at" {
                storeReinstatedAt = r.null() ? nil : try r.date()
            } else if key == "operator_revocation" {
                operatorRevocation = r.null() ? nil : try RevocationMark(json: &r)
            } else if key == "operator_lifts_store_before" {
                operatorLiftsStoreBefore = .some(r.null() ? nil : try r.date())
            } else if key == "operator_reinstated_at" {
                operatorReinstatedAt = r.null() ? nil : try r.date()
            } else if key == "is_upgraded" {
                isUpgraded = try r.bool()
            } else if key == "will_auto_renew" {
                willAutoRenew = r.null() ? nil : try r.bool()
            } else if key == "in_billing_retry" {
                inBillingRetry = try r.bool()
            } else if key == "environment" {
                environment = r.null() ? nil : try StoreEnvironment(json: &r)
            } else if key == "representative" {
                representative = try ReportOrderKey(json: &r)
            } else if key == "first_observed_at" {
                firstObservedAt = try r.date()
            } else if key == "last_observed_at" {
                lastObservedAt = try r.date()
            } else if key == "renewal" {
                renewal = r.null() ? nil : try RenewalMark(json: &r)
            } else {
                try r.skip()
            }
        }
        guard let transactionID, let originalTransactionID, let productID, let purchasedAt, let isUpgraded,
            let inBillingRetry, let representative, let firstObservedAt, let lastObservedAt
        else { throw reader.error("a transaction aggregate without all of its members") }
        self.init(
            transactionID: transactionID, originalTransactionID: originalTransactionID, productID: productID,
            purchasedAt: purchasedAt, expiresAt: expiresAt, gracePeriodExpiresAt: gracePeriodExpiresAt,
            storeRevocation: storeRevocation, storeReinstatedAt: storeReinstatedAt, operatorRevocation: operatorRevocation,
            operatorReinstatedAt: operatorReinstatedAt,
            // Stored before unrevokes named what they saw: lifted by time, as then.
            operatorLiftsStoreBefore: operatorLiftsStoreBefore ?? operatorReinstatedAt, isUpgraded: isUpgraded, willAutoRenew: willAutoRenew,
            inBillingRetry: inBillingRetry, environment: environment, representative: representative,
            firstObservedAt: firstObservedAt, lastObservedAt: lastObservedAt, renewal: renewal)
    }
}

extension RenewalMark {
    init(json reader: inout JSONReader) throws {
        var details: RenewalDetails?, sourceReport: ReportOrderKey?, willAutoRenew: Bool?, inBillingRetry = false
        try reader.object { r, key in
            if key == "details" {
                details = try RenewalDetails(json: &r)
            } else if key == "source_report" {
                sourceReport = try ReportOrderKey(json: &r)
            } else if key == "will_auto_renew" {
                willAutoRenew = r.null() ? nil : try r.bool()
            } else if key == "in_billing_retry" {
                inBillingRetry = try r.bool()
            } else {
                try r.skip()
            }
        }
        guard let details, let sourceReport else { throw reader.error("a renewal mark without all of its members") }
        self.init(details: details, sourceReport: sourceReport, willAutoRenew: willAutoRenew, inBillingRetry: inBillingRetry)
    }
}

extension RenewalDetails {
    init(json reader: inout JSONReader) throws {
        var details = RenewalDetails()
        try reader.object { r, key in
            if key == "expiration_reason" {
                details.expirationReason = r.null() ? nil : try ExpirationReason(json: &r)
            } else if key == "renewal_product_id" {
                details.renewalProductID = r.null() ? nil : try r.string()
            } else if key == "price_increase_status" {
                details.priceIncreaseStatus = r.null() ? nil : try PriceIncreaseStatus(json: &r)
            } else if key == "renewal_date" {
                details.renewalDate = r.null() ? nil : try r.date()
            } else if key == "signed_at" {
                details.signedAt = r.null() ? nil : try r.date()
            } else {
                try r.skip()
            }
        }
        self = details
    }
}

extension RevocationMark {
    init(json reader: inout JSONReader) throws {
        var revokedAt: Date?, reason: RevocationReason?, sourceReport: ReportOrderKey?
        try reader.object { r, key in
            if key == "revoked_at" {
                revokedAt = try r.date()
            } else if key == "reason" {
                reason = r.null() ? nil : try RevocationReason(json: &r)
            } else if key == "source_report" {
                sourceReport = try ReportOrderKey(json: &r)
            } else {
                try r.skip()
            }
        }
        guard let revokedAt, let sourceReport else { throw reader.error("a revocation without all of its members") }
        self.init(revokedAt: revokedAt, reason: reason, sourceReport: sourceReport)
    }
}

extension ReportOrderKey {
    init(json reader: inout JSONReader) throws {
        var isVerified: Bool?, signedDate: Date?, observedAt: Date?, reportID: String?
        try reader.object { r, key in
            if key == "is_verified" {
                isVerified = try r.bool()
            } else if key == "signed_date" {
                signedDate = r.null() ? nil : try r.date()
            } else if key == "observed_at" {
                observedAt = try r.date()
            } else if key == "report_id" {
                reportID = try r.string()
            } else {
                try r.skip()
            }
        }
        guard let isVerified, let observedAt, let reportID else { throw reader.error("a report order key without all of its members") }
        self.init(isVerified: isVerified, signedDate: signedDate, observedAt: observedAt, reportID: reportID)
    }
}
