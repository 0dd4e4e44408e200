import Foundation
import SyncCore
import Testing

@Suite struct ReportValidationTests {
    let valid = report(
        "6F9619FF-8B86-D011-B42D-00C04FC964FF", transaction: "2000000222", product: ProductID.basicMonthly,
        purchased: utc(2025, 1, 1), expires: utc(2025, 2, 1), observed: utc(2025, 1, 2))

    @Test func aValidReportPasses() throws {
        try valid.validate()
        #expect(valid.validationErrors().isEmpty)
    }

    @Test func idsAreCheckedForLengthAndCharset() {
        var r = valid
        r.reportID = ""
        #expect(r.validationErrors() == [ReportValidationError(field: "report_id", problem: .empty)])
        r = valid
        r.deviceID = String(repeating: "a", count: 129)
        #expect(r.validationErrors() == [ReportValidationError(field: "device_id", problem: .tooLong(maximum: 128))])
        r.deviceID = String(repeating: "a", count: 128)
        #expect(r.validationErrors().isEmpty)
        r = valid
        r.transactionID = "12 34"
        #expect(r.validationErrors() == [ReportValidationError(field: "transaction_id", problem: .invalidCharacters)])
        r.transactionID = "tx-1.2_3:4"
        #expect(r.validationErrors().isEmpty)
        r.productID = "voip/basic"
        r.originalTransactionID = "é"
        #expect(r.validationErrors().map(\.field) == ["product_id", "original_transaction_id"])
    }

    @Test func datesAreCheckedForRangeAndOrder() {
        var r = valid
        r.observedAt = utc(1999, 12, 31)
        #expect(throws: ReportValidationError(field: "observed_at", problem: .dateOutOfRange)) { try r.validate() }
        r = valid
        r.purchasedAt = utc(2100, 1, 1)
        r.expiresAt = nil
        #expect(r.validationErrors().map(\.field) == ["purchased_at"])
        r = valid
        r.expiresAt = utc(2024, 12, 31)
        #expect(r.validationErrors() == [ReportValidationError(field: "expires_at", problem: .beforePurchase)])
        r = valid
        r.revokedAt = utc(2024, 12, 31)
        r.gracePeriodExpiresAt = utc(2101, 1, 1)
        #expect(r.validationErrors().map(\.field) == ["grace_period_expires_at", "revoked_at"])
        // Boundaries: 2000-01-01 is accepted, 2100-01-01 is not.
        r = valid
        r.observedAt = utc(2000, 1, 1)
        #expect(r.validationErrors().isEmpty)
        r.observedAt = utc(2100, 1, 1)
        #expect(r.validationErrors().map(\.field) == ["observed_at"])
    }

    @Test func messagesNameTheField() {
        var r = valid
        r.expiresAt = utc(2024, 1, 1)
        #expect(r.validationErrors().first?.message == "expires_at must not be before purchased_at")
        r.signedTransaction = String(repeating: "x", count: Report.maximumSignedTransactionLength + 1)
        #expect(r.validationErrors().map(\.field) == ["expires_at", "signed_transaction"])
    }
}
