import Foundation
import SyncCore
import SyncStore

/// The JSON of an account: its resolved state, devices and bookkeeping.
struct AccountResponse: Encodable {
    var snapshot: AccountReader.Snapshot
    /// The `appAccountToken` the app should put on this account's purchases (``AppAccountTokens``).
    var appAccountToken: UUID?
    /// Each meter's balance (account reads only; sync answers leave it out).
    var usage: [UsageView]? = nil

    enum CodingKeys: String, CodingKey {
        case accountID = "account_id"
        case tier, features, limits, ads, entitlements
        case nextTransitionAt = "next_transition_at"
        case devices
        case lastSequence = "last_sequence"
        case pendingReports = "pending_reports"
        case resolvedAt = "resolved_at"
        case appAccountToken = "app_account_token"
        case usage
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        let state = snapshot.state
        try container.encode(snapshot.accountID, forKey: .accountID)
        try container.encode(state.tier, forKey: .tier)
        try container.encode(state.features, forKey: .features)
        try container.encode(state.limits, forKey: .limits)
        try container.encode(state.ads, forKey: .ads)
        try container.encode(state.entitlements, forKey: .entitlements)
        try container.encode(state.nextTransitionAt, forKey: .nextTransitionAt)
        try container.encode(snapshot.devices, forKey: .devices)
        try container.encode(snapshot.lastSequence, forKey: .lastSequence)
        try container.encode(snapshot.pendingReports, forKey: .pendingReports)
        try container.encode(snapshot.resolvedAt, forKey: .resolvedAt)
        try container.encode(appAccountToken?.uuidString.lowercased(), forKey: .appAccountToken)
        try container.encodeIfPresent(usage, forKey: .usage)
    }
}

/// The answer to a sync request.
struct SyncResponse: Encodable {
    var accepted: Int
    var duplicates: Int
    var resolved: Bool
    var account: AccountResponse
}
