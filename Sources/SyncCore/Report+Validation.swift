import Foundation

extension Report {
    /// Longest accepted id (`report_id`, `device_id`, `product_id`, transaction ids).
    public static let maximumIDLength = 128
    /// Longest accepted `signed_transaction` (a StoreKit JWS is a few KiB).
    public static let maximumSignedTransactionLength = 65_536
    /// Earliest accepted date, 2000-01-01T00:00:00Z (inclusive).
    public static let earliestAcceptedDate = Date(timeIntervalSince1970: 946_684_800)
    /// Latest accepted date, 2100-01-01T00:00:00Z (exclusive).
    public static let latestAcceptedDate = Date(timeIntervalSince1970: 4_102_444_800)

    /// Checks the report's shape and throws the first problem, in wire-field order. Pure: it does
    /// not look at the clock, so a report observed "in the future" by a skewed device is accepted.
    public func validate() throws(ReportValidationError) {
        if let first = validationErrors().first { throw first }
    }

    /// Every problem of the report, in wire-field order (empty when the report is valid).
    public func validationErrors() -> [ReportValidationError] {
        var errors: [ReportValidationError] = []
        func checkID(_ value: String, _ key: CodingKeys) {
            if let problem = Report.idProblem(value) {
                errors.append(ReportValidationError(field: key.rawValue, problem: problem))
            }
        }
        func checkDate(_ value: Date?, _ key: CodingKeys, notBeforePurchase: Bool = false) {
            guard let value else { return }
            if value < Report.earliestAcceptedDate || value >= Report.latestAcceptedDate {
                errors.append(ReportValidationError(field: key.rawValue, problem: .dateOutOfRange))
            } else if notBeforePurchase && value < purchasedAt {
                errors.append(ReportValidationError(field: key.rawValue, problem: .beforePurchase))
            }
        }
        checkID(reportID, .reportID)
        checkID(deviceID, .deviceID)
        checkDate(observedAt, .observedAt)
        checkID(productID, .productID)
        checkID(originalTransactionID, .originalTransactionID)
        checkID(transactionID, .transactionID)
        checkDate(purchasedAt, .purchasedAt)
        checkDate(expiresAt, .expiresAt, notBeforePurchase: true)
        checkDate(gracePeriodExpiresAt, .gracePeriodExpiresAt, notBeforePurchase: true)
        checkDate(revokedAt, .revokedAt, notBeforePurchase: true)
        if let renewalProductID = renewal?.renewalProductID { checkID(renewalProductID, .renewalProductID) }
        checkDate(renewal?.renewalDate, .renewalDate)
        if let signedTransaction, signedTransaction.utf8.count > Report.maximumSignedTransactionLength {
            errors.append(
                ReportValidationError(
                    field: CodingKeys.signedTransaction.rawValue,
                    problem: .tooLong(maximum: Report.maximumSignedTransactionLength)))
        }
        if trust.adminAction != nil && trust.source != .admin {
            errors.append(ReportValidationError(field: "admin_action", problem: .inconsistentTrust))
        }
        return errors
    }

    /// `nil` when `value` is a valid id: 1–128 characters of `[A-Za-z0-9._:-]`.
    static func idProblem(_ value: String) -> ReportValidationError.Problem? {
        let bytes = value.utf8
        if bytes.isEmpty { return .empty }
        // Every allowed character is one ASCII byte, so the byte count is the character count
        // whenever the charset check passes; check the charset first so that long garbage is
        // reported as what it is.
        for byte in bytes where !isIDByte(byte) { return .invalidCharacters }
        if bytes.count > maximumIDLength { return .tooLong(maximum: maximumIDLength) }
        return nil
    }

    private static func isIDByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: ":"), UInt8(ascii: "-"):
            true
        default:
            false
        }
    }
}
