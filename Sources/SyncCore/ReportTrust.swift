import Foundation

/// The part of a report the server decides, not the device: where it came from and whether its
/// StoreKit signature verified. It is not part of the device wire format (``Report`` never encodes
/// or decodes it), so a device cannot claim to be verified; the HTTP layer sets it after decoding
/// and the store persists it in its own columns.
public struct ReportTrust: Sendable, Equatable, Hashable, Codable {
    /// The channel the report arrived through.
    public var source: ReportSource
    /// Whether `signed_transaction` verified against the store's certificate chain.
    public var isVerified: Bool
    /// The JWS `signedDate` of a verified report, or the command time of an admin report.
    /// Ignored for unverified device and store reports (a device could put anything there).
    public var signedDate: Date?
    /// The operator's action; only honoured when ``source`` is ``ReportSource/admin``.
    public var adminAction: AdminAction?

    public init(source: ReportSource, isVerified: Bool, signedDate: Date? = nil, adminAction: AdminAction? = nil) {
        self.source = source
        self.isVerified = isVerified
        self.signedDate = signedDate
        self.adminAction = adminAction
    }

    /// What every report decoded from a device starts as: a device report, not verified.
    public static let unverifiedDevice = ReportTrust(source: .device, isVerified: false)

    /// A report from `source` whose signature verified, signed by the store at `signedDate`.
    public static func verified(signedDate: Date, source: ReportSource = .device) -> ReportTrust {
        ReportTrust(source: source, isVerified: true, signedDate: signedDate)
    }

    /// An operator's command issued at `at`.
    public static func admin(_ action: AdminAction, at: Date) -> ReportTrust {
        ReportTrust(source: .admin, isVerified: false, signedDate: at, adminAction: action)
    }

    /// The operator's action if this really is an admin report; `nil` otherwise.
    public var effectiveAdminAction: AdminAction? {
        source == .admin ? adminAction : nil
    }

    /// The signed date that may order reports: only a verified report's `signed_date`. (An admin
    /// report's command time orders its revoke/unrevoke, not its descriptive fields, so an
    /// operator command does not freeze auto-renew or billing state against later devices.)
    public var trustedSignedDate: Date? {
        isVerified ? signedDate : nil
    }

    enum CodingKeys: String, CodingKey {
        case source
        case isVerified = "is_verified"
        case signedDate = "signed_date"
        case adminAction = "admin_action"
    }
}
