import Foundation
import Logging
import SyncCore
import SyncStore

/// Decides what a device's reports become (issue #7, "policy"):
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
    let logger: Logger

    /// The admitted reports, and the purchase each verified one claims for the account.
    struct Admitted {
        var reports: [Report] = []
        var claims: [PurchaseClaim] = []
    }

    func admit(_ payloads: [ReportPayload], deviceID: String) async throws -> Admitted {
        var admitted = Admitted()
        admitted.reports.reserveCapacity(payloads.count)
        for (index, payload) in payloads.enumerated() {
            var report: Report
            if let jws = payload.signedTransaction {
                let verified = try await verify(jws, index: index)
                do {
                    report = try verified.report(
                        reportID: payload.reportID, deviceID: payload.deviceID ?? deviceID, observedAt: payload.observedAt)
                } catch {
                    throw error.refusal(at: "reports[\(index)].signed_transaction")
                }
                if let renewalJWS = payload.signedRenewalInfo {
                    let renewal = try await verifyRenewal(renewalJWS, index: index)
                    guard renewal.originalTransactionId == report.originalTransactionID else {
                        throw APIError(
                            .unprocessableContent, code: "invalid_report",
                            message: "reports[\(index)].signed_renewal_info is for another purchase than its signed_transaction")
                    }
                    report.apply(renewal)
                }
                admitted.claims.append(
                    PurchaseClaim(
                        originalTransactionID: report.originalTransactionID,
                        appAccountToken: verified.payload.appAccountToken.flatMap(UUID.init(uuidString:))))
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

    private func verifyRenewal(_ jws: String, index: Int) async throws -> JWSRenewalInfoPayload {
        // The transaction beside it verified, so there is a verifier.
        guard let verifier else { throw APIError.unavailable("signature verification is not configured on this server") }
        do {
            return try await verifier.verifyRenewalInfo(jws)
        } catch {
            ServiceMetrics.signatureRefused(error.code).increment()
            logger.notice("signed renewal info refused", metadata: ["reason": "\(error)", "report_index": "\(index)"])
            throw error.refusal(at: "reports[\(index)].signed_renewal_info")
        }
    }

    private func verify(_ jws: String, index: Int) async throws -> VerifiedTransaction {
        guard let verifier else {
            if requireSigned {
                throw APIError.unavailable("signature verification is not configured on this server", retryAfterSeconds: 60)
            }
            // A signed report that cannot be checked must neither pass as checked nor take its
            // fields from an unchecked payload, so it is refused even in development.
            throw APIError(
                .unprocessableContent, code: "verification_unavailable",
                message: "reports[\(index)].signed_transaction cannot be verified: this server has no trusted roots configured; send the report without it")
        }
        do {
            let verified = try await verifier.verifyTransaction(jws)
            ServiceMetrics.signedReportsVerified.increment()
            return verified
        } catch {
            ServiceMetrics.signatureRefused(error.code).increment()
            logger.notice("signed transaction refused", metadata: ["reason": "\(error)", "report_index": "\(index)"])
            throw error.refusal(at: "reports[\(index)].signed_transaction")
        }
    }

}

extension StoreKitVerificationError {
    /// The 422 of the signed payload at `field` (e.g. `reports[2].signed_transaction`), with the
    /// verifier's code.
    func refusal(at field: String) -> APIError {
        APIError(.unprocessableContent, code: code, message: "\(field): \(clientMessage)")
    }

    /// What a client is told; details of chains and parsing stay in the logs.
    var clientMessage: String {
        switch self {
        case .badSignature: "the signature does not verify"
        case .untrustedChain: "the certificate chain does not lead to a trusted root"
        case .wrongBundle: "signed for another app (bundle id)"
        case .wrongEnvironment(let environment): "environment \(environment ?? "none") is not accepted here"
        case .certificateExpired: "a certificate of the chain was not valid at the signed date"
        case .malformed: "not a well-formed StoreKit JWS"
        case .unsupportedAlgorithm: "only ES256 is accepted"
        case .wrongApp: "signed for another app (app Apple id)"
        }
    }
}
