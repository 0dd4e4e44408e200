import Foundation
import HummingbirdTesting
import SubsyncClient
import SyncCore
import SyncService
import TestSupport
import Testing

/// Devices cannot take the report ids the service writes its own reports under (docs/API.md,
/// ids): a store report named by facts a device knows, pre-taken, would make the service's
/// insert a silent no-op.
@Suite("Reserved report ids")
struct ReservedReportIDTests {
    @Test("a device's sync under a store:, asn: or admin- report id is refused (400 reserved_report_id) and stores nothing; the client's own ids are not reserved")
    func reservedReportIDsAreRefused() async throws {
        try await TestEnvironment.withFresh { env in
            let trust = try StoreKitTrust()
            let now = Date()
            // A spare copy of the user's genuine purchase, signed before any refund.
            let spare = try trust.authority.sign(StoreKitTrust.transaction(
                original: "7200", purchased: now.addingTimeInterval(-86_400), expires: now.addingTimeInterval(29 * 86_400),
                signed: now.addingTimeInterval(-600)))
            try await env.application(requireSigned: true, verifier: trust.verifier).test(.router) { client in
                let token = try await env.token(for: "acct-squat")
                for id in [
                    "store:7200:0123456789abcdef", "store:7200:0123456789abcdef.1767225600000",
                    "asn:6f9619ff-8b86-d011-b42d-00c04fc964ff", "admin-6f9619ff-8b86-d011-b42d-00c04fc964ff", "STORE:7200:x",
                ] {
                    let (status, json) = try await client.sync(
                        account: "acct-squat", body: try StoreKitTrust.signedBody(reportID: id, jws: spare), credential: token,
                        waitMilliseconds: nil)
                    #expect(status == .badRequest, "\(id)")
                    #expect(json.errorCode == "reserved_report_id", "\(id): \(json)")
                    #expect(json.errorMessage?.contains("reports[0].report_id") == true, "\(id): \(json)")
                }
                #expect(try await env.count("reports", accountID: "acct-squat") == 0)
                #expect(try await env.count("devices", accountID: "acct-squat") == 0)
                #expect(try await env.scalar("SELECT count(*) FROM transaction_owners WHERE original_transaction_id = '7200'") == 0)

                // SubsyncClient names a report by a digest of its content (r1-<hex>): not reserved.
                let ownID = Purchase(signedTransaction: spare).reportID
                #expect(ReportNamespace.reservedPrefix(of: ownID) == nil)
                let (status, _) = try await client.sync(
                    account: "acct-squat", body: try StoreKitTrust.signedBody(reportID: ownID, jws: spare), credential: token)
                #expect(status == .accepted)
                #expect(try await env.count("reports", accountID: "acct-squat") == 1)
            }
        }
    }
}
