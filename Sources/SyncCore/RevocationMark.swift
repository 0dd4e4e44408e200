import Foundation

/// The latest revocation of one source (the store's or the operator's) seen for a transaction:
/// its time, its reason, and the key of the report that carried it (which breaks ties between
/// reports revoking at the same instant, so that the reason is chosen by a total order and stays
/// a join).
public struct RevocationMark: Sendable, Hashable, Codable {
    /// The revocation time (`revoked_at`, or an admin revoke's command time).
    public var revokedAt: Date
    public var reason: RevocationReason?
    /// The order key of the report that carried this revocation.
    public var sourceReport: ReportOrderKey

    public init(revokedAt: Date, reason: RevocationReason?, sourceReport: ReportOrderKey) {
        self.revokedAt = revokedAt
        self.reason = reason
        self.sourceReport = sourceReport
    }

    /// The later of two marks in the (revoked_at, report key) order; absent counts as none.
    static func latest(_ a: RevocationMark?, _ b: RevocationMark?) -> RevocationMark? {
        guard let a else { return b }
        guard let b else { return a }
        return b.isAfter(a) ? b : a
    }

    /// Whether `self` comes after `other` in the (revoked_at, report key) order.
    func isAfter(_ other: RevocationMark) -> Bool {
        if revokedAt != other.revokedAt { return revokedAt > other.revokedAt }
        return other.sourceReport < sourceReport
    }

    enum CodingKeys: String, CodingKey {
        case revokedAt = "revoked_at"
        case reason
        case sourceReport = "source_report"
    }
}
