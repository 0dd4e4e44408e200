import Foundation
import SyncCore

/// A signed transaction whose signature, chain, bundle id and environment verified
/// (the result of ``StoreKitVerifier/verifyTransaction(_:)``).
public struct VerifiedTransaction: Sendable, Equatable, Hashable {
    /// The verified payload.
    public var payload: JWSTransactionPayload
    /// The payload's environment, already checked against the allowed ones.
    public var environment: StoreEnvironment
    /// The JWS as received.
    public var jws: String

    /// Wraps a payload that ``StoreKitVerifier`` verified.
    public init(payload: JWSTransactionPayload, environment: StoreEnvironment, jws: String) {
        self.payload = payload
        self.environment = environment
        self.jws = jws
    }

    /// When the App Store signed the transaction; trusted, so it may order reports
    /// (docs/RESOLUTION.md, "Per transaction: the join").
    public var signedDate: Date { payload.signedDate }

    /// The report this transaction makes: every resolution field comes from the signed payload, none
    /// from the device's JSON, and the trust is `.verified(signedDate:)`. Fields a transaction does not
    /// sign (grace period, auto-renew, billing retry) are left unknown rather than taken from the device.
    /// - Parameters:
    ///   - reportID: the device's report id (the idempotency key).
    ///   - deviceID: the reporting device.
    ///   - observedAt: when the device observed it.
    ///   - source: who reported it (`store` for App Store Server Notifications).
    /// - Throws: ``StoreKitVerificationError/malformed(_:)`` when the signed payload lacks
    ///   `transactionId`, `originalTransactionId`, `productId` or `purchaseDate`.
    public func report(
        reportID: String, deviceID: String, observedAt: Date, source: ReportSource = .device
    ) throws(StoreKitVerificationError) -> Report {
        guard let transactionID = payload.transactionId, let originalTransactionID = payload.originalTransactionId,
            let productID = payload.productId, let purchasedAt = payload.purchaseDate
        else {
            throw .malformed("the signed transaction lacks transactionId, originalTransactionId, productId or purchaseDate")
        }
        return Report(
            reportID: reportID,
            deviceID: deviceID,
            observedAt: observedAt,
            productID: productID,
            originalTransactionID: originalTransactionID,
            transactionID: transactionID,
            purchasedAt: purchasedAt,
            expiresAt: payload.expiresDate,
            gracePeriodExpiresAt: nil,
            revokedAt: payload.revocationDate,
            revocationReason: revocationReason,
            isUpgraded: payload.isUpgraded ?? false,
            willAutoRenew: nil,
            inBillingRetry: false,
            environment: environment,
            signedTransaction: jws,
            trust: .verified(signedDate: payload.signedDate, source: source)
        )
    }

    /// StoreKit's numeric reason mapped to the domain's; an unknown code on a revoked transaction
    /// counts as `other` (the transaction is revoked either way).
    private var revocationReason: RevocationReason? {
        switch payload.revocationReason {
        case nil: payload.revocationDate == nil ? nil : .other
        case 1: .developerIssue
        default: .other
        }
    }
}
