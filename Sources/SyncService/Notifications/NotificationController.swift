import Foundation
import Hummingbird
import Logging
import SyncCore
import SyncStore

/// `POST /v1/notifications/apple`: App Store Server Notifications V2.
///
/// Apple authenticates by signature, not by a header, so the route takes no key: the
/// `signedPayload` and the transaction inside it must verify like a device's signed transaction.
/// A notification that carries a transaction becomes one verified report with source `store`,
/// for the account that owns the purchase, or else the account its (proven) `appAccountToken`
/// names (``TransactionBinder/account(for:)``). The answer never names the account: the caller
/// is unauthenticated until its signature is checked, and Apple does not need it. Each
/// `notificationUUID` is handled once; a repeat is answered 200 and ignored. Answers are 200 for
/// everything Apple should not retry (applied, duplicate, unmatched, ignored), 422 for a payload
/// that does not verify, 404 `not_configured` without trusted roots, 503 when the database is
/// away (Apple retries anything but 200).
struct NotificationController: Sendable {
    let verifier: StoreKitVerifier?
    let binder: TransactionBinder
    let store: AppStoreNotificationStore
    /// Which account a token on the purchase may bind to.
    let tokens: AppAccountTokens
    /// Per source address: the route takes no key, and every request costs a signature check.
    let limiter: RateLimiter?
    /// Whose forwarded address counts as the source (``TrustedProxies``).
    var proxies: TrustedProxies = .none
    /// Raised so this process's workers resolve the new report at once.
    let arrivals: WakeSignal
    let logger: Logger

    static let maximumBodyBytes = 256 * 1024
    /// The store's reports name this reporter as their device.
    static let deviceID = "app-store"

    func addRoutes(to router: Router<SubsyncRequestContext>) {
        router.post("v1/notifications/apple") { request, context in
            if let limiter, let wait = await limiter.take(context.clientAddress(of: request, trusting: proxies)) {
                ServiceMetrics.storeNotifications("rate_limited").increment()
                throw APIError.rateLimited(retryAfter: wait, what: "this address")
            }
            let body = try await request.collectBody(upTo: Self.maximumBodyBytes, context: context)
            let answer = try await handle(Data(buffer: body))
            ServiceMetrics.storeNotifications(answer.status.rawValue).increment()
            return try JSONResponse.make(answer)
        }
    }

    /// The answer body.
    struct Answer: Encodable {
        /// What became of the notification; the raw value is what Apple is answered.
        enum Status: String, Encodable {
            /// Its report was stored for an account.
            case applied
            /// Handled before (its `notificationUUID` is recorded): nothing done.
            case duplicate
            /// No account has its purchase yet: kept for the account that binds it.
            case unmatched
            /// Nothing to apply (no transaction in it).
            case ignored
        }

        var status: Status
        var notificationUUID: String

        enum CodingKeys: String, CodingKey {
            case status
            case notificationUUID = "notification_uuid"
        }
    }

    private struct Body: Decodable {
        var signedPayload: String
    }

    func handle(_ body: Data) async throws -> Answer {
        let signedPayload: String
        do {
            signedPayload = try JSONDecoder().decode(Body.self, from: body).signedPayload
        } catch {
            throw APIError(.badRequest, code: "invalid_request", message: "the body must be a JSON object with a string signedPayload")
        }
        return try await handle(signedPayload: signedPayload, environment: nil)
    }

    /// Handles one signed notification, from Apple's POST or from Get Notification History (the
    /// backfill, ``NotificationBackfill``): the same checks, the same deduplication by
    /// `notificationUUID`, the same report. `environment`: the App Store Server API's, which a
    /// notification from its history must be of.
    func handle(signedPayload: String, environment: StoreEnvironment?) async throws -> Answer {
        guard signedPayload.utf8.count <= Self.maximumBodyBytes else {
            throw APIError(.contentTooLarge, code: "body_too_large", message: "signedPayload is larger than \(Self.maximumBodyBytes) bytes")
        }
        try TextField.check(signedPayload, field: "signedPayload")
        guard let verifier else {
            // Not an outage: the route does not exist until it is configured. Apple retries
            // any non-200 for days, so nothing is lost while an operator sets it up.
            throw APIError(
                .notFound, code: "not_configured",
                message: "App Store notifications need SUBSYNC_APPLE_ROOT_CERTIFICATES and SUBSYNC_BUNDLE_ID on this server")
        }
        let notification = try await verified { try await verifier.verifyNotification(signedPayload) }
        if let environment {
            try await verified { try StoreKitVerificationError.requireSameEnvironment(notification, as: environment) }
        }
        guard let notificationUUID = UUID(uuidString: notification.notificationUUID) else {
            throw APIError(.unprocessableContent, code: "malformed", message: "notificationUUID is not a UUID")
        }
        var answer = Answer(status: .duplicate, notificationUUID: notificationUUID.uuidString.lowercased())
        if try await store.contains(notificationUUID) { return answer }

        var record = AppStoreNotificationStore.Record(
            notificationUUID: notificationUUID, type: notification.notificationType, subtype: notification.subtype,
            originalTransactionID: nil, signedDate: notification.signedDate, signedPayload: signedPayload)
        guard let transactionJWS = notification.data?.signedTransactionInfo else {
            answer.status = try await store.insert(record, status: .ignored, accountID: nil) ? .ignored : .duplicate
            return answer
        }
        let transaction = try await verified { try await verifier.verifyTransaction(transactionJWS) }
        // What the notification carries is of its environment: a sandbox transaction inside a
        // production notification (or the other way round) is refused like a bad signature.
        try await verified { try StoreKitVerificationError.requireSameEnvironment(notification, as: transaction.environment) }
        var renewal: JWSRenewalInfoPayload?
        if let renewalJWS = notification.data?.signedRenewalInfo {
            let info = try await verified { try await verifier.verifyRenewalInfo(renewalJWS) as JWSRenewalInfoPayload }
            try await verified { try StoreKitVerificationError.requireSameEnvironment(info, as: transaction.environment) }
            renewal = info
        }
        let report = try Self.report(notification: notification, transaction: transaction, renewal: renewal, notificationUUID: notificationUUID)
        record.originalTransactionID = report.originalTransactionID
        record.report = report
        let claim = PurchaseClaim(
            originalTransactionID: report.originalTransactionID,
            appAccountToken: transaction.payload.appAccountToken.flatMap(UUID.init(uuidString:)))

        let accountID: String
        if let owner = try await binder.account(for: claim) {
            accountID = owner
        } else {
            // Under the purchase's binding lock: a device binding it right now either binds first
            // (its account is found here) or after this commits (and applies what is kept).
            let kept = try await binder.ownerOrKeepUnmatched(record, claim: claim, in: store)
            guard let owner = kept.owner else {
                logger.notice("App Store notification for a purchase no account has yet", metadata: [
                    "type": "\(notification.notificationType)", "original_transaction_id": "\(report.originalTransactionID)",
                ])
                answer.status = kept.inserted ? .unmatched : .duplicate
                return answer
            }
            accountID = owner
        }
        // The token binds only where it belongs; an unproven one is kept on the report, no more.
        let binding = PurchaseClaim(
            originalTransactionID: claim.originalTransactionID,
            appAccountToken: claim.appAccountToken.flatMap { tokens.proves($0, for: accountID) ? $0 : nil })
        let applied = try await binder.applyNotification(record, report: report, to: accountID, claim: binding, in: store)
        guard let applied else { return answer }
        await arrivals.signal()
        logger.info("App Store notification applied", metadata: [
            "type": "\(notification.notificationType)", "account_id": "\(applied)",
        ])
        answer.status = .applied
        return answer
    }

    /// Runs a verification, turning its failure into a 422 with the verifier's code.
    private func verified<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as StoreKitVerificationError {
            throw error.refused(at: "signedPayload", logger: logger, "App Store notification refused")
        }
    }

    /// The report a notification makes: the signed transaction as the store sees it, with what the
    /// renewal info and the notification type add (auto-renew, billing retry, grace period, and
    /// for REFUND/REVOKE a revocation even when the transaction lacks its date).
    static func report(
        notification: NotificationPayload, transaction: VerifiedTransaction, renewal: JWSRenewalInfoPayload?, notificationUUID: UUID
    ) throws -> Report {
        let observedAt = notification.signedDate ?? transaction.signedDate
        var report: Report
        do {
            report = try transaction.report(
                reportID: ReportNamespace.notification + notificationUUID.uuidString.lowercased(), deviceID: deviceID, observedAt: observedAt, source: .store)
        } catch {
            throw error.refusal(at: "signedTransactionInfo")
        }
        if let renewal, renewal.originalTransactionId == nil || renewal.originalTransactionId == report.originalTransactionID {
            report.apply(renewal)
        }
        switch notification.notificationType {
        case "REFUND", "REVOKE":
            if report.revokedAt == nil {
                report.revokedAt = observedAt
                report.revocationReason = .other
            }
        case "EXPIRED":
            if renewal == nil { report.willAutoRenew = false }
        case "DID_FAIL_TO_RENEW":
            if renewal == nil { report.inBillingRetry = true }
        default:
            break
        }
        do {
            try report.validate()
        } catch {
            throw APIError(.unprocessableContent, code: "invalid_report", message: "signedTransactionInfo: \(error.field): \(error.message)")
        }
        return report
    }
}
