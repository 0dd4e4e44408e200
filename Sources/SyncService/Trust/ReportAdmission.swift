import Foundation
import Logging
import SyncCore
import SyncStore

/// Decides what a device's reports become (docs/STOREKIT.md):
/// - a report with `signed_transaction` is verified by the ``StoreKitVerifier``; it then takes
///   every transaction field from the signed payload (none from the device's JSON) and is
///   *verified*, with its `signed_date` trusted. `signed_renewal_info` beside it, verified too
///   and of the same purchase, supplies auto-renew, billing retry and grace period. One that does not verify is refused with the
///   verifier's code, whatever the policy: a forged signature is never stored;
/// - a report without one is refused with `signature_required` when signatures are required,
///   and stored unverified (as the device sent it) otherwise.
///
/// The whole request is refused on the first bad report, so nothing of it is stored.
struct ReportAdmission: Sendable {
    /// `nil` when no roots and bundle id are configured.
    let verifier: StoreKitVerifier?
    let requireSigned: Bool
    /// Which `appAccountToken`s an account may bind.
    let tokens: AppAccountTokens
    let logger: Logger

    /// The admitted reports, and the purchase each verified one claims for the account.
    struct Admitted {
        var reports: [Report] = []
        var claims: [PurchaseClaim] = []
    }

    func admit(_ payloads: [ReportPayload], accountID: String, deviceID: String) async throws -> Admitted {
        var admitted = Admitted()
        admitted.reports.reserveCapacity(payloads.count)
        for (index, payload) in payloads.enumerated() {
            var report: Report
            if let jws = payload.signedTransaction {
                let verified = try await checked(at: "reports[\(index)].signed_transaction", index: index) {
                    (verifier) async throws(StoreKitVerificationError) in try await verifier.verifyTransaction(jws)
                }
                ServiceMetrics.signedReportsVerified.increment()
                do {
                    report = try verified.report(
                        reportID: payload.reportID, deviceID: payload.deviceID ?? deviceID, observedAt: payload.observedAt)
                } catch {
                    throw error.refusal(at: "reports[\(index)].signed_transaction")
                }
                if let renewalJWS = payload.signedRenewalInfo {
                    let renewal = try await checked(at: "reports[\(index)].signed_renewal_info", index: index) {
                        (verifier) async throws(StoreKitVerificationError) -> JWSRenewalInfoPayload in try await verifier.verifyRenewalInfo(renewalJWS)
                    }
                    guard renewal.originalTransactionId == report.originalTransactionID else {
                        throw APIError(
                            .unprocessableContent, code: "invalid_report",
                            message: "reports[\(index)].signed_renewal_info is for another purchase than its signed_transaction")
                    }
                    do {
                        try StoreKitVerificationError.requireSameEnvironment(renewal, as: verified.environment)
                    } catch {
                        throw error.refused(
                            at: "reports[\(index)].signed_renewal_info", logger: logger, "signed payload refused",
                            metadata: ["field": "reports[\(index)].signed_renewal_info", "report_index": "\(index)"])
                    }
                    report.apply(renewal)
                }
                admitted.claims.append(
                    PurchaseClaim(
                        originalTransactionID: report.originalTransactionID,
                        appAccountToken: provenToken(verified.payload.appAccountToken, accountID: accountID, index: index)))
            } else {
                if payload.signedRenewalInfo != nil {
                    throw APIError(
                        .unprocessableContent, code: "invalid_report",
                        message: "reports[\(index)].signed_renewal_info needs the signed_transaction it belongs to")
                }
                guard !requireSigned else {
                    ServiceMetrics.signatureRefused("signature_required").increment()
                    throw APIError(
                        .unprocessableContent, code: "signature_required",
                        message: "reports[\(index)] has no signed_transaction; this service accepts only StoreKit 2 signed transactions")
                }
                do {
                    report = try payload.unverifiedReport(defaultDeviceID: deviceID)
                } catch {
                    throw APIError(.unprocessableContent, code: "invalid_report",
                                   message: "reports[\(index)].\(error.name) is required (or send signed_transaction)")
                }
            }
            do {
                try report.validate()
            } catch {
                throw APIError(.unprocessableContent, code: "invalid_report", message: "reports[\(index)].\(error.field): \(error.message)")
            }
            admitted.reports.append(report)
        }
        return admitted
    }

    /// The purchase's `appAccountToken` when it is `accountID`'s own (see ``AppAccountTokens``);
    /// another one is unproven: counted, logged, and neither bound nor a conflict.
    private func provenToken(_ text: String?, accountID: String, index: Int) -> UUID? {
        guard let text, let token = UUID(uuidString: text) else { return nil }
        guard tokens.proves(token, for: accountID) else {
            ServiceMetrics.unprovenAppAccountTokens.increment()
            logger.notice("a purchase carries an appAccountToken that is not this account's; it is stored but does not bind", metadata: [
                "account_id": "\(accountID)", "report_index": "\(index)",
            ])
            return nil
        }
        return token
    }

    /// Runs `check` with the verifier on the JWS at `field` (e.g. `reports[2].signed_transaction`),
    /// turning a failure into its counted, logged 422.
    private func checked<T>(
        at field: String, index: Int, _ check: (StoreKitVerifier) async throws(StoreKitVerificationError) -> T
    ) async throws -> T {
        guard let verifier else {
            if requireSigned {
                throw APIError.unavailable("signature verification is not configured on this server", retryAfterSeconds: 60)
            }
            // A signed report that cannot be checked must neither pass as checked nor take its
            // fields from an unchecked payload, so it is refused even in development.
            throw APIError(
                .unprocessableContent, code: "verification_unavailable",
                message: "\(field) cannot be verified: this server has no trusted roots configured; send the report without it")
        }
        do {
            return try await check(verifier)
        } catch {
            throw error.refused(at: field, logger: logger, "signed payload refused", metadata: ["field": "\(field)", "report_index": "\(index)"])
        }
    }
}

extension StoreKitVerificationError {
    /// The 422 of the signed payload at `field` (e.g. `reports[2].signed_transaction`), with the
    /// verifier's code.
    func refusal(at field: String) -> APIError {
        APIError(.unprocessableContent, code: code, message: "\(field): \(clientMessage)")
    }

    /// Counts the refusal, logs it (with the details a client is not told), and returns the 422
    /// of the payload at `field`.
    func refused(at field: String, logger: Logger, _ message: Logger.Message, metadata: Logger.Metadata = [:]) -> APIError {
        ServiceMetrics.signatureRefused(code).increment()
        logger.notice(message, metadata: metadata.merging(["reason": "\(self)"]) { $1 })
        return refusal(at: field)
    }

    /// What a client is told; details of chains and parsing stay in the logs.
    var clientMessage: String {
        switch self {
        case .badSignature: "the signature does not verify"
        case .untrustedChain: "the certificate chain does not lead to a trusted root"
        case .wrongBundle: "signed for another app (bundle id)"
        case .wrongEnvironment(let environment): "environment \(Self.quoted(environment)) is not accepted here"
        case .certificateExpired: "a certificate of the chain was not valid at the signed date"
        case .malformed: "not a well-formed StoreKit JWS"
        case .unsupportedAlgorithm: "only ES256 is accepted"
        case .wrongApp: "signed for another app (app Apple id)"
        case .environmentMismatch(let environment, let expected):
            "environment \(Self.quoted(environment)) is not that of the payload it goes with (\(Self.quoted(expected)))"
        }
    }
}
