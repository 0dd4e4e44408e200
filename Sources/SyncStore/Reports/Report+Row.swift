import Foundation
import Postgres
import SyncCore

extension Report {
    /// The columns ``init(row:offset:)`` reads, in order.
    static let columns = """
        report_id, device_id, source, observed_at, product_id, original_transaction_id,
        transaction_id, purchased_at, expires_at, grace_period_expires_at, revoked_at,
        revocation_reason, is_upgraded, will_auto_renew, in_billing_retry, environment,
        verified, signed_date, admin_action, has_renewal, expiration_reason, renewal_product_id,
        price_increase_status, renewal_date, renewal_signed_at
        """

    /// Reads a report from a row holding ``columns`` starting at `offset`.
    init(row: Row, offset: Int = 0) throws {
        func text(_ index: Int) throws -> String? { try row.decode(String?.self, at: offset + index) }
        func enumValue<T: RawRepresentable>(_ type: T.Type, _ index: Int) throws -> T? where T.RawValue == String {
            guard let raw = try text(index) else { return nil }
            guard let value = T(rawValue: raw) else {
                throw PostgresError(.decoding, message: "unknown \(T.self) '\(raw)' in stored report")
            }
            return value
        }
        let source = try enumValue(ReportSource.self, 2) ?? .device
        self.init(
            reportID: try row.decode(String.self, at: offset),
            deviceID: try row.decode(String.self, at: offset + 1),
            observedAt: try row.decode(Date.self, at: offset + 3),
            productID: try row.decode(String.self, at: offset + 4),
            originalTransactionID: try row.decode(String.self, at: offset + 5),
            transactionID: try row.decode(String.self, at: offset + 6),
            purchasedAt: try row.decode(Date.self, at: offset + 7),
            expiresAt: try row.decode(Date?.self, at: offset + 8),
            gracePeriodExpiresAt: try row.decode(Date?.self, at: offset + 9),
            revokedAt: try row.decode(Date?.self, at: offset + 10),
            revocationReason: try enumValue(RevocationReason.self, 11),
            isUpgraded: try row.decode(Bool?.self, at: offset + 12) ?? false,
            willAutoRenew: try row.decode(Bool?.self, at: offset + 13),
            inBillingRetry: try row.decode(Bool?.self, at: offset + 14) ?? false,
            environment: try enumValue(StoreEnvironment.self, 15),
            signedTransaction: nil,
            renewal: try row.decode(Bool.self, at: offset + 19)
                ? RenewalDetails(
                    expirationReason: try enumValue(ExpirationReason.self, 20),
                    renewalProductID: try text(21),
                    priceIncreaseStatus: try enumValue(PriceIncreaseStatus.self, 22),
                    renewalDate: try row.decode(Date?.self, at: offset + 23),
                    signedAt: try row.decode(Date?.self, at: offset + 24))
                : nil,
            trust: ReportTrust(
                source: source,
                isVerified: try row.decode(Bool.self, at: offset + 16),
                signedDate: try row.decode(Date?.self, at: offset + 17),
                adminAction: try enumValue(AdminAction.self, 18)
            )
        )
    }
}
