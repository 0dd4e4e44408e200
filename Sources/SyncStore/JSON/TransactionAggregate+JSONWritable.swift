import Postgres
import SyncCore

extension TransactionAggregate: JSONWritable {
    /// The bytes of the synthesized `encode(to:)`: keys sorted, absent optionals left out.
    public func write(to writer: inout JSONWriter) throws {
        writer.object { w in
            if let environment {
                w.key("environment")
                w.string(environment.rawValue)
            }
            if let expiresAt {
                w.key("expires_at")
                w.date(expiresAt)
            }
            w.key("first_observed_at")
            w.date(firstObservedAt)
            if let gracePeriodExpiresAt {
                w.key("grace_period_expires_at")
                w.date(gracePeriodExpiresAt)
            }
            w.key("in_billing_retry")
            w.bool(inBillingRetry)
            w.key("is_upgraded")
            w.bool(isUpgraded)
            w.key("last_observed_at")
            w.date(lastObservedAt)
            if let storeReinstatedAt {
                w.key("latest_reinstated_at")
                w.date(storeReinstatedAt)
            }
            if let operatorLiftsStoreBefore {
                w.key("operator_lifts_store_before")
                w.date(operatorLiftsStoreBefore)
            }
            if let operatorReinstatedAt {
                w.key("operator_reinstated_at")
                w.date(operatorReinstatedAt)
            }
            if let operatorRevocation {
                w.key("operator_revocation")
                operatorRevocation.write(to: &w)
            }
            w.key("original_transaction_id")
            w.string(originalTransactionID)
            w.key("product_id")
            w.string(productID)
            w.key("purchased_at")
            w.date(purchasedAt)
            if let renewal {
                w.key("renewal")
                w.object { w in
                    w.key("details")
                    renewal.details.write(to: &w)
                    w.key("in_billing_retry")
                    w.bool(renewal.inBillingRetry)
                    w.key("source_report")
                    renewal.sourceReport.write(to: &w)
                    if let willAutoRenew = renewal.willAutoRenew {
                        w.key("will_auto_renew")
                        w.bool(willAutoRenew)
                    }
                }
            }
            w.key("representative")
            representative.write(to: &w)
            if let storeRevocation {
                w.key("revocation")
                storeRevocation.write(to: &w)
            }
            w.key("transaction_id")
            w.string(transactionID)
            if let willAutoRenew {
                w.key("will_auto_renew")
                w.bool(willAutoRenew)
            }
        }
    }
}

extension ReportOrderKey {
    /// The bytes of the synthesized `encode(to:)`.
    func write(to writer: inout JSONWriter) {
        writer.object { w in
            w.key("is_verified")
            w.bool(isVerified)
            w.key("observed_at")
            w.date(observedAt)
            w.key("report_id")
            w.string(reportID)
            if let signedDate {
                w.key("signed_date")
                w.date(signedDate)
            }
        }
    }
}

extension RevocationMark {
    /// The bytes of the synthesized `encode(to:)`.
    func write(to writer: inout JSONWriter) {
        writer.object { w in
            if let reason {
                w.key("reason")
                w.string(reason.rawValue)
            }
            w.key("revoked_at")
            w.date(revokedAt)
            w.key("source_report")
            sourceReport.write(to: &w)
        }
    }
}

extension RenewalDetails {
    /// The bytes of the synthesized `encode(to:)`.
    func write(to writer: inout JSONWriter) {
        writer.object { w in
            if let expirationReason {
                w.key("expiration_reason")
                w.string(expirationReason.rawValue)
            }
            if let priceIncreaseStatus {
                w.key("price_increase_status")
                w.string(priceIncreaseStatus.rawValue)
            }
            if let renewalDate {
                w.key("renewal_date")
                w.date(renewalDate)
            }
            if let renewalProductID {
                w.key("renewal_product_id")
                w.string(renewalProductID)
            }
            if let signedAt {
                w.key("signed_at")
                w.date(signedAt)
            }
        }
    }
}
