/// Who produced a report. Set by the server from the channel a report arrived through, never
/// taken from the device's JSON.
public enum ReportSource: String, Sendable, Equatable, Hashable, Codable, CaseIterable {
    /// A device sync call (`POST /v1/accounts/{id}/sync`).
    case device
    /// The store itself (App Store Server Notifications / Server API), usually verified.
    case store
    /// An operator command (`subsync accounts ... revoke|unrevoke`); carries an ``AdminAction``.
    case admin
}
