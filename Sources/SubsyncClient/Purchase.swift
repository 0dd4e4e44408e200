import Foundation

/// What StoreKit 2 gave the app about one transaction, as plain values: the client makes a report
/// of it (``SubsyncClient/sync(_:)``).
///
/// On a device, pass `Transaction.jwsRepresentation` (a `VerificationResult`'s) and, for a
/// subscription, `Product.SubscriptionInfo.RenewalInfo`'s JWS: the service verifies both against
/// Apple's certificates and trusts nothing else in the report. ``TransactionFields`` are for
/// development servers that accept unsigned reports (`SUBSYNC_REQUIRE_SIGNED=false`).
public struct Purchase: Sendable, Hashable, Codable {
    /// The transaction's JWS (`VerificationResult<Transaction>.jwsRepresentation`).
    public var signedTransaction: String?
    /// The subscription's renewal info JWS, when there is one.
    public var signedRenewalInfo: String?
    /// The transaction's fields, unsigned (development servers only).
    public var transaction: TransactionFields?

    /// A signed transaction (what a real app sends).
    public init(signedTransaction: String, signedRenewalInfo: String? = nil) {
        self.signedTransaction = signedTransaction
        self.signedRenewalInfo = signedRenewalInfo
    }

    /// An unsigned transaction, for a development server (`SUBSYNC_REQUIRE_SIGNED=false`).
    public init(transaction: TransactionFields, signedRenewalInfo: String? = nil) {
        self.transaction = transaction
        self.signedRenewalInfo = signedRenewalInfo
    }

    /// The report id this purchase is sent under: derived from its content (the JWS, or every
    /// unsigned field), so the same purchase reported again (a retry after a crash, a restore, a
    /// reinstall) is a duplicate on the server, never a second report.
    public var reportID: String {
        var parts = ["subsync-report-v1", signedTransaction ?? "-", signedRenewalInfo ?? "-"]
        if let transaction { parts += transaction.canonicalParts } else { parts.append("-") }
        return "r1-" + SHA256.hex(parts.joined(separator: "\n"))
    }
}

/// A transaction's fields as the device saw them, for a server that accepts unsigned reports.
public struct TransactionFields: Sendable, Hashable, Codable {
    public var productID: String
    public var originalTransactionID: String
    public var transactionID: String
    public var purchasedAt: Date
    public var expiresAt: Date?
    public var gracePeriodExpiresAt: Date?
    public var revokedAt: Date?
    /// `developer_issue` or `other` (StoreKit's `Transaction.RevocationReason`).
    public var revocationReason: String?
    public var isUpgraded: Bool
    public var willAutoRenew: Bool?
    public var inBillingRetry: Bool
    /// `Production`, `Sandbox` or `Xcode`.
    public var environment: String?

    public init(
        productID: String, originalTransactionID: String, transactionID: String, purchasedAt: Date, expiresAt: Date? = nil,
        gracePeriodExpiresAt: Date? = nil, revokedAt: Date? = nil, revocationReason: String? = nil, isUpgraded: Bool = false,
        willAutoRenew: Bool? = nil, inBillingRetry: Bool = false, environment: String? = nil
    ) {
        self.productID = productID
        self.originalTransactionID = originalTransactionID
        self.transactionID = transactionID
        self.purchasedAt = purchasedAt
        self.expiresAt = expiresAt
        self.gracePeriodExpiresAt = gracePeriodExpiresAt
        self.revokedAt = revokedAt
        self.revocationReason = revocationReason
        self.isUpgraded = isUpgraded
        self.willAutoRenew = willAutoRenew
        self.inBillingRetry = inBillingRetry
        self.environment = environment
    }

    /// Every field in a fixed order, dates in whole milliseconds: the input of the report id.
    var canonicalParts: [String] {
        func date(_ value: Date?) -> String { value.map { String(Int64(($0.timeIntervalSince1970 * 1000).rounded())) } ?? "-" }
        func flag(_ value: Bool?) -> String { value.map { $0 ? "1" : "0" } ?? "-" }
        return [
            productID, originalTransactionID, transactionID, date(purchasedAt), date(expiresAt), date(gracePeriodExpiresAt),
            date(revokedAt), revocationReason ?? "-", flag(isUpgraded), flag(willAutoRenew), flag(inBillingRetry), environment ?? "-",
        ]
    }
}
