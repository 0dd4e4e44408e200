import Foundation

/// The total order on reports that picks a transaction's representative report: greatest by
/// (verified, signed_date, observed_at, report_id) (docs/RESOLUTION.md, "Per transaction: the join").
///
/// A verified report beats every unverified one, so a verified report's descriptive fields are
/// authoritative whatever unverified devices say later. `signed_date` only counts when trusted
/// (see ``ReportTrust/trustedSignedDate``); absent sorts lowest. `report_id` breaks the remaining
/// ties, which makes the order total (report ids are unique), so "take the greatest" is a join.
public struct ReportOrderKey: Sendable, Hashable, Comparable, Codable {
    public var isVerified: Bool
    public var signedDate: Date?
    public var observedAt: Date
    public var reportID: String

    public init(isVerified: Bool, signedDate: Date?, observedAt: Date, reportID: String) {
        self.isVerified = isVerified
        self.signedDate = signedDate
        self.observedAt = observedAt
        self.reportID = reportID
    }

    /// The key of `report`.
    public init(_ report: Report) {
        self.init(
            isVerified: report.trust.isVerified,
            signedDate: report.trust.trustedSignedDate,
            observedAt: report.observedAt,
            reportID: report.reportID)
    }

    public static func < (lhs: ReportOrderKey, rhs: ReportOrderKey) -> Bool {
        if lhs.isVerified != rhs.isVerified { return !lhs.isVerified }
        switch (lhs.signedDate, rhs.signedDate) {
        case (nil, .some): return true
        case (.some, nil): return false
        case (.some(let l), .some(let r)) where l != r: return l < r
        default: break
        }
        if lhs.observedAt != rhs.observedAt { return lhs.observedAt < rhs.observedAt }
        return lhs.reportID < rhs.reportID
    }

    enum CodingKeys: String, CodingKey {
        case isVerified = "is_verified"
        case signedDate = "signed_date"
        case observedAt = "observed_at"
        case reportID = "report_id"
    }
}
