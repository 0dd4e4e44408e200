import Crypto
import Foundation
import Postgres
import SyncCore
import SyncService
import SyncStore
import HummingbirdTesting
import Testing

/// A StoreKit trust of the tests' own: a certificate chain, a verifier that trusts it, and the
/// signed transactions, renewal infos and App Store notifications it signs (docs/STOREKIT.md).
public struct StoreKitTrust: Sendable {
    public static let bundleID = "com.example.subsync"
    /// The key of the `appAccountToken`s that the tests' accounts are given.
    public static let appAccountTokenKey = "app-account-token-key-for-tests-0123456789"
    public let authority: TestCertificateAuthority
    public let verifier: StoreKitVerifier

    public init() throws {
        authority = try TestCertificateAuthority()
        verifier = try StoreKitVerifier(rootCertificates: [authority.root], bundleID: Self.bundleID, allowedEnvironments: [.production])
    }


    public static func transaction(
        original: String, id: String? = nil, product: String = "voip.premium.monthly", purchased: Date, expires: Date?,
        signed: Date, revoked: Date? = nil, token: UUID? = nil, environment: String = "Production", bundle: String = bundleID
    ) -> JWSTransactionPayload {
        JWSTransactionPayload(
            transactionId: id ?? original, originalTransactionId: original, bundleId: bundle, productId: product,
            purchaseDate: purchased, expiresDate: expires, revocationDate: revoked, revocationReason: revoked == nil ? nil : 0,
            type: "Auto-Renewable Subscription", environment: environment, signedDate: signed,
            appAccountToken: token?.uuidString)
    }

    /// A sync body whose one report carries `jws` and device-side fields that lie.
    public static func signedBody(reportID: String, jws: String?, renewal: String? = nil, device: String = "phone") throws -> Data {
        var report: [String: Any] = [
            "report_id": reportID, "observed_at": RFC3339.format(Date()),
            // Ignored for a verified report: the signed payload is the truth.
            "product_id": "voip.business.yearly", "original_transaction_id": "forged", "transaction_id": "forged",
            "purchased_at": "2020-01-01T00:00:00Z", "expires_at": "2099-01-01T00:00:00Z",
            "grace_period_expires_at": "2099-01-01T00:00:00Z", "in_billing_retry": false, "will_auto_renew": true,
        ]
        if let jws { report["signed_transaction"] = jws }
        if let renewal { report["signed_renewal_info"] = renewal }
        return try JSONSerialization.data(withJSONObject: ["device": ["id": device, "platform": "ios"], "reports": [report]])
    }

    /// Signed renewal info of `original` (Apple's JWSRenewalInfoDecodedPayload fields).
    public func renewalInfo(
        original: String, autoRenew: Bool, billingRetry: Bool, grace: Date?, signed: Date, ca: TestCertificateAuthority? = nil,
        environment: String = "Production"
    ) throws -> String {
        var payload: [String: Any] = [
            "originalTransactionId": original, "autoRenewProductId": "voip.premium.monthly", "productId": "voip.premium.monthly",
            "autoRenewStatus": autoRenew ? 1 : 0, "isInBillingRetryPeriod": billingRetry,
            "environment": environment, "signedDate": (signed.timeIntervalSince1970 * 1000).rounded(),
        ]
        if let grace { payload["gracePeriodExpiresDate"] = (grace.timeIntervalSince1970 * 1000).rounded() }
        let signer = ca ?? authority
        return try signer.sign(header: try signer.header(), payload: try JSONSerialization.data(withJSONObject: payload))
    }

    public static func unsignedBody(reportID: String, expires: String = "2099-01-01T00:00:00Z") throws -> Data {
        try SyncBody(device: "phone", reports: [
            Report(
                reportID: reportID, deviceID: "phone", observedAt: Date(), productID: "voip.business.yearly",
                originalTransactionID: "self-made", transactionID: "self-made", purchasedAt: Date().addingTimeInterval(-60),
                expiresAt: RFC3339.parse(expires), trust: .unverifiedDevice),
        ]).data
    }

    /// A signed App Store Server Notification V2 carrying `transaction` (and optional renewal info).
    public func notification(
        _ type: String, uuid: UUID = UUID(), transaction: JWSTransactionPayload?, signed: Date, renewal: [String: Any]? = nil,
        environment: String = "Production"
    ) throws -> Data {
        var data: [String: Any] = ["bundleId": Self.bundleID, "environment": environment]
        if let transaction { data["signedTransactionInfo"] = try authority.sign(transaction) }
        if let renewal {
            data["signedRenewalInfo"] = try authority.sign(
                header: try authority.header(), payload: try JSONSerialization.data(withJSONObject: renewal))
        }
        let payload: [String: Any] = [
            "notificationType": type, "notificationUUID": uuid.uuidString, "version": "2.0",
            "signedDate": (signed.timeIntervalSince1970 * 1000).rounded(), "data": data,
        ]
        let jws = try authority.sign(header: try authority.header(), payload: try JSONSerialization.data(withJSONObject: payload))
        return try JSONSerialization.data(withJSONObject: ["signedPayload": jws])
    }
}

extension StoreKitTrust {
    /// The account once none of its reports is pending.
    public func settled(_ client: some TestClientProtocol, _ account: String) async throws -> [String: Any] {
        var json: [String: Any] = [:]
        if try await waitUntil({
            json = try await client.getJSON("/v1/accounts/\(account)").json
            return json["pending_reports"] as? Int == 0
        }) {
            return json
        }
        Issue.record("\(account) still has pending reports")
        return [:]
    }

    public func entitlementStatus(_ account: [String: Any]) -> String? {
        (account["entitlements"] as? [[String: Any]])?.first?["status"] as? String
    }
}

extension StoreKitTrust {
    public static func deviceReported(_ first: JWSTransactionPayload, account: String, trust: StoreKitTrust, env: TestEnvironment) async throws {
        let report = try await trust.verifier.verifyTransaction(try trust.authority.sign(first))
            .report(reportID: "\(account)-d1", deviceID: "phone", observedAt: first.signedDate)
        let engine = ResolutionEngine(pool: env.pool, catalogue: .default)
        _ = try await TransactionBinder(pool: env.pool, engine: engine, policy: .reject).submit(
            accountID: account, device: DeviceInfo(id: "phone"), reports: [report],
            claims: [PurchaseClaim(originalTransactionID: report.originalTransactionID, appAccountToken: nil)])
        let resolved = try await engine.resolvePendingBatch(limit: 10).reportsResolved
        guard resolved == 1 else { throw TestSetupError("the device report was not resolved (\(resolved))") }
    }
}

extension StoreKitTrust {
    /// The account a store notification was applied to.
    public func notificationAccount(_ env: TestEnvironment, _ uuid: UUID) async throws -> String? {
        let rows = try await env.pool.query(
            "SELECT account_id FROM store_notifications WHERE notification_uuid = \(uuid.uuidString.lowercased())::uuid")
        return try rows.first?.decode(String?.self, at: 0)
    }
}
