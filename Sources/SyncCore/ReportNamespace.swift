/// The report id prefixes under which the service writes reports of its own. A device's report
/// under one of them could take the id first, and the service's insert (idempotent on the id)
/// would then drop the service's report; so device reports may not use them (docs/API.md, ids).
public enum ReportNamespace {
    /// Store reports made of the App Store Server API's answers (reconcile against the store, the
    /// expiry check): `store:<transaction>:<digest of the facts>[.<ms>]`.
    public static let store = "store:"
    /// App Store Server Notifications: `asn:<notificationUUID>`.
    public static let notification = "asn:"
    /// An operator's revoke or unrevoke: `admin-<uuid>`.
    public static let admin = "admin-"

    /// Every prefix the service writes under.
    public static let reserved = [store, notification, admin]

    /// The reserved prefix `reportID` starts with, compared without regard to case, or `nil`.
    public static func reservedPrefix(of reportID: String) -> String? {
        let lowercased = reportID.lowercased()
        return reserved.first { lowercased.hasPrefix($0) }
    }
}
