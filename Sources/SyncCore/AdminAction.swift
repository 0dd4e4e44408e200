/// An operator's explicit decision about one transaction, recorded as a report with
/// ``ReportSource/admin`` so that it joins like any other report.
public enum AdminAction: String, Sendable, Equatable, Hashable, Codable, CaseIterable {
    /// Counts as the operator's revocation at the report's time (`signed_date`, else
    /// `observed_at`): only a later `unrevoke` lifts it, never a report the store signed.
    case revoke
    /// Counts as a reinstatement at the report's time: it lifts every revocation that is not later,
    /// the operator's and the store's.
    case unrevoke
}
