import Foundation

/// Units reserved on the service before they are spent (a call about to start): settle it with
/// what was used, or release it (docs/USAGE.md, *Holds*).
public struct Hold: Sendable, Hashable, Codable {
    /// The service's id of the hold (a UUID).
    public var id: String
    public var meter: String
    /// Units granted: at most what was asked, fewer when fewer were left.
    public var units: Int
    /// After this the hold counts for nothing (it can still be settled: the call happened).
    public var expiresAt: Date

    enum CodingKeys: String, CodingKey {
        case id, meter, units
        case expiresAt = "expires_at"
    }
}
