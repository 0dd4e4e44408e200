import Foundation
import Postgres
import SyncCore
import SyncStore

// Every sync answers with the account: its members (features, limits, devices) are too hot a
// path for the generic encoder (docs/PERFORMANCE.md, *In the code*). These write the bytes
// `encode(to:)` gives through ``PostgresJSONEncoder`` (keys
// sorted, absent optionals as the coders write them); `ResponseWriterTests` compares the two.

extension AccountResponse: JSONWritable {
    func write(to writer: inout JSONWriter) throws {
        let state = snapshot.state
        try writer.object { w in
            w.key("account_id")
            w.string(snapshot.accountID)
            w.key("ads")
            w.bool(state.ads)
            w.key("app_account_token")
            w.string(appAccountToken?.uuidString.lowercased())
            w.key("devices")
            w.array(snapshot.devices) { w, device in device.write(to: &w) }
            w.key("entitlements")
            try w.array(state.entitlements) { w, entitlement in try entitlement.write(to: &w) }
            w.key("features")
            w.array(state.features) { w, feature in w.string(feature) }
            w.key("last_sequence")
            w.int(snapshot.lastSequence)
            w.key("limits")
            w.limits(state.limits)
            w.key("next_transition_at")
            w.date(state.nextTransitionAt)
            w.key("pending_reports")
            w.int(snapshot.pendingReports)
            w.key("resolved_at")
            w.date(snapshot.resolvedAt)
            w.key("tier")
            w.string(state.tier)
            if let usage {
                w.key("usage")
                try w.value(usage)
            }
        }
    }
}

extension SyncResponse: JSONWritable {
    func write(to writer: inout JSONWriter) throws {
        try writer.object { w in
            w.key("accepted")
            w.int(accepted)
            w.key("account")
            try account.write(to: &w)
            w.key("duplicates")
            w.int(duplicates)
            w.key("resolved")
            w.bool(resolved)
        }
    }
}

extension AccountReader.Device {
    /// The synthesized `encode(to:)`'s bytes: keys sorted, a missing platform or app version left out.
    func write(to writer: inout JSONWriter) {
        writer.object { w in
            if let appVersion {
                w.key("app_version")
                w.string(appVersion)
            }
            w.key("first_seen_at")
            w.date(firstSeenAt)
            w.key("id")
            w.string(id)
            w.key("last_seen_at")
            w.date(lastSeenAt)
            if let platform {
                w.key("platform")
                w.string(platform)
            }
        }
    }
}
