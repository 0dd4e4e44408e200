import Foundation
import Postgres

/// A device of an account's snapshot, from the `json_agg` of ``AccountReader/snapshot(accountID:now:countingPending:)``:
/// read by hand, as the stored documents are (``JSONReadable``), since every sync reads it
/// (docs/PERFORMANCE.md, "In the code").
extension AccountReader.Device: JSONReadable {
    public init(json reader: inout JSONReader) throws {
        var id: String?
        var platform: String?
        var appVersion: String?
        var firstSeenAt: Date?
        var lastSeenAt: Date?
        try reader.object { reader, key in
            if key == "id" {
                id = try reader.string()
            } else if key == "platform" {
                platform = reader.null() ? nil : try reader.string()
            } else if key == "app_version" {
                appVersion = reader.null() ? nil : try reader.string()
            } else if key == "first_seen_at" {
                firstSeenAt = try reader.date()
            } else if key == "last_seen_at" {
                lastSeenAt = try reader.date()
            } else {
                try reader.skip()
            }
        }
        guard let id, let firstSeenAt, let lastSeenAt else { throw reader.error("a device without its id or times") }
        self.init(id: id, platform: platform, appVersion: appVersion, firstSeenAt: firstSeenAt, lastSeenAt: lastSeenAt)
    }
}
