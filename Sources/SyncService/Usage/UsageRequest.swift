import Foundation
import SyncCore
import SyncStore

/// The body of `POST /v1/accounts/{account_id}/usage`: what a device consumed, in batches,
/// possibly days late.
///
/// ```json
/// { "device": {"id": "iphone-7f3a"},
///   "usage": [ {"id": "call-2b9c", "meter": "minutes", "units": 12, "at": "2026-11-23T10:04:00Z"} ] }
/// ```
struct UsageRequest: Decodable {
    var device: DeviceInfo
    var usage: [UsagePayload]
}

/// One usage on the wire. `id` is the device's own id for it (a call id): the same id twice from
/// the same device counts once.
struct UsagePayload: Decodable {
    var id: String
    var meter: String
    var units: Int
    var at: Date
}

/// Limits on what a usage request may carry.
enum UsageLimits {
    static let maximumEntries = 500
    static let maximumBodyBytes = 256 * 1024
    /// How far ahead of the service's clock a device's clock may run (how late usage may be
    /// reported is the operator's ``UsagePolicy/lateWindow``).
    static let maximumLead: TimeInterval = UsagePolicy.clockSkew

    /// 422 `unknown_meter` / `invalid_units` unless `meter` is the catalogue's and `units` is
    /// 1...``UsageUnits/maximum``; `field` prefixes the names in the message (`usage[3].`).
    static func check(meter: String, units: Int, catalogue: Catalogue, field: String) throws {
        guard catalogue.meter(id: meter) != nil else {
            let known = catalogue.meters.map(\.id).joined(separator: ", ")
            throw APIError(.unprocessableContent, code: "unknown_meter",
                           message: "\(field)meter: no meter \"\(meter.prefix(64))\" in the catalogue (known: \(known.isEmpty ? "none" : known))")
        }
        guard (1...UsageUnits.maximum).contains(units) else {
            throw APIError(.unprocessableContent, code: "invalid_units", message: "\(field)units must be 1 to \(UsageUnits.maximum), got \(units)")
        }
    }

    /// 422 `invalid_time` unless `time` is within the late window before `now` and ``maximumLead`` after it.
    static func check(time: Date, now: Date, policy: UsagePolicy, field: String) throws {
        guard time <= now.addingTimeInterval(maximumLead), time >= now.addingTimeInterval(-policy.lateWindow) else {
            throw APIError(.unprocessableContent, code: "invalid_time",
                           message: "\(field) must be within the late window (\(Self.describe(policy.lateWindow))) and not in the future")
        }
    }

    /// `90 days`, `36 hours`: a late window for people.
    static func describe(_ window: TimeInterval) -> String {
        let hours = Int(window / 3600)
        return hours % 24 == 0 ? "\(hours / 24) day\(hours == 24 ? "" : "s")" : "\(hours) hour\(hours == 1 ? "" : "s")"
    }
}

extension UsageRequest {
    /// The ledger id of a device's usage entry: `usage:<device id>:<usage id>`, with each `:` of
    /// the device id written `%3A`, so that no two (device, usage id) pairs share an id: both may
    /// hold `:`, and `a:b` + `c` and `a` + `b:c` once made the same id, the second counted as a
    /// duplicate of the first. Ids cannot hold `%`, so the escape is unambiguous; a device id
    /// without `:` keeps the form it always had, so its retries stay duplicates across the change
    /// (docs/USAGE.md).
    static func ledgerID(device: String, usage: String) -> String {
        "usage:\(device.replacingOccurrences(of: ":", with: "%3A")):\(usage)"
    }

    /// Decodes and checks a body against `catalogue` at `now`, or throws an ``APIError`` naming the
    /// bad field; nothing is stored for a request with one bad entry.
    static func decode(_ data: Data, catalogue: Catalogue, policy: UsagePolicy, now: Date) throws -> (DeviceInfo, [UsageEntry]) {
        let request = try WireBody.decode(UsageRequest.self, from: data)
        try WireBody.check(request.device)
        guard (1...UsageLimits.maximumEntries).contains(request.usage.count) else {
            throw APIError(.unprocessableContent, code: "invalid_usage",
                           message: "send 1 to \(UsageLimits.maximumEntries) usage entries per request, got \(request.usage.count)")
        }
        var entries: [UsageEntry] = []
        var seen: [String: UsageEntry] = [:]
        for (index, payload) in request.usage.enumerated() {
            let field = "usage[\(index)]"
            guard Identifier.isValid(payload.id) else {
                throw APIError(.badRequest, code: "invalid_request", message: "\(field).id must be 1–128 characters of letters, digits and ._:@-")
            }
            try UsageLimits.check(meter: payload.meter, units: payload.units, catalogue: catalogue, field: field + ".")
            try UsageLimits.check(time: payload.at, now: now, policy: policy, field: field + ".at")
            // Namespaced by device: two devices that both number their calls from 1 never collide.
            let entry = UsageEntry(
                id: Self.ledgerID(device: request.device.id, usage: payload.id), meter: payload.meter, kind: .usage, units: payload.units,
                at: payload.at.roundedToMicroseconds)
            if let earlier = seen[entry.meter + "\u{0}" + entry.id] {
                guard earlier == entry else {
                    throw APIError(.conflict, code: "usage_conflict", message: "\(field).id \"\(payload.id)\" appears twice with different units or times")
                }
                continue
            }
            seen[entry.meter + "\u{0}" + entry.id] = entry
            entries.append(entry)
        }
        return (request.device, entries)
    }
}

/// The body of `POST /v1/accounts/{account_id}/usage/holds`: reserve units before spending them.
struct HoldRequest: Decodable {
    var device: DeviceInfo
    var meter: String
    var units: Int
    /// How long the hold lasts unless settled or released (default 300 s, 1–3600).
    var ttlSeconds: Int

    enum CodingKeys: String, CodingKey {
        case device, meter, units
        case ttlSeconds = "ttl_seconds"
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        device = try c.decode(DeviceInfo.self, forKey: .device)
        meter = try c.decode(String.self, forKey: .meter)
        units = try c.decode(Int.self, forKey: .units)
        ttlSeconds = try c.decodeIfPresent(Int.self, forKey: .ttlSeconds) ?? 300
    }

    static func decode(_ data: Data, catalogue: Catalogue) throws -> HoldRequest {
        let request = try WireBody.decode(HoldRequest.self, from: data)
        try WireBody.check(request.device)
        try UsageLimits.check(meter: request.meter, units: request.units, catalogue: catalogue, field: "")
        guard (1...3_600).contains(request.ttlSeconds) else {
            throw APIError(.unprocessableContent, code: "invalid_ttl", message: "ttl_seconds must be 1 to 3600, got \(request.ttlSeconds)")
        }
        return request
    }
}
