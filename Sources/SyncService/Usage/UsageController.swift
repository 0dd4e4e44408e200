import Foundation
import Hummingbird
import Postgres
import SyncCore
import SyncStore

/// `/v1/accounts/{account_id}/usage`: devices report what they consumed; devices and backends
/// read balances, periods and entries (docs/USAGE.md).
struct UsageController: Sendable {
    let ledger: UsageLedger
    let holds: UsageHolds
    let catalogue: Catalogue
    let policy: UsagePolicy
    let authenticator: Authenticator
    let clock: any ServiceClock
    /// Usage writes per account from device tokens (`SUBSYNC_RATE_LIMIT_ACCOUNT`, buckets of their
    /// own: usage does not spend the sync budget); admin callers are not limited.
    let limiter: RateLimiter?

    /// Authorizes a write to `accountID`'s usage and takes from its bucket when a device writes.
    func authorizeWrite(_ request: Request, accountID: String) async throws {
        let principal = try await authenticator.authorize(request, accountID: accountID)
        if !principal.isAdmin, let limiter, let wait = await limiter.take(accountID) {
            throw APIError.rateLimited(retryAfter: wait, what: "this account")
        }
    }

    func addRoutes(to router: Router<SubsyncRequestContext>) {
        let usage = router.group("v1/accounts/:account_id/usage")
        usage.post { request, context in
            let accountID = try AccountController.accountID(context)
            try await authorizeWrite(request, accountID: accountID)
            let now = clock.now()
            let body = try await request.collectBody(upTo: UsageLimits.maximumBodyBytes, context: context)
            let (device, entries) = try UsageRequest.decode(Data(buffer: body), catalogue: catalogue, policy: policy, now: now)
            let submission: UsageLedger.Submission
            do {
                submission = try await ledger.submit(entries, accountID: accountID, device: device, now: now)
            } catch let conflict as UsageLedger.Conflict {
                throw APIError(.conflict, code: "usage_conflict",
                               message: "usage id \"\(conflict.usageID.split(separator: ":").last ?? "")\" of this device is already stored with other units or another time; nothing was stored")
            } catch let full as UsageLedger.PeriodFull {
                throw Self.periodFull(full, outcome: "nothing was stored")
            } catch let early as UsageLedger.BeforeFirstContact {
                throw APIError(.unprocessableContent, code: "before_first_contact",
                               message: "usage[\(early.index)].at is before this device first reached the service (\(RFC3339.format(early.firstContact)), less \(Int(UsagePolicy.clockSkew / 60)) minutes of clock skew); usage cannot be dated before it; nothing was stored")
            }
            return try JSONResponse.make(
                SubmissionBody(accepted: submission.accepted, duplicates: submission.duplicates, usage: try await views(of: accountID, now: now)),
                status: .accepted)
        }
        usage.get { request, context in
            let accountID = try AccountController.accountID(context)
            _ = try await authenticator.authorize(request, accountID: accountID)
            let now = clock.now()
            let query = request.uri.queryParameters
            let selection = try PeriodSelection(query.get("period"))
            let cursor = try query.get("cursor").map(Self.decodeCursor)
            var meterFilter = query.get("meter")
            if let cursor {
                guard meterFilter == nil || meterFilter == cursor.meter else {
                    throw APIError(.badRequest, code: "invalid_request", message: "cursor belongs to meter \"\(cursor.meter)\", not \"\(meterFilter ?? "")\"")
                }
                meterFilter = cursor.meter
            }
            if let meterFilter, catalogue.meter(id: meterFilter) == nil {
                throw APIError(.unprocessableContent, code: "unknown_meter", message: "no meter \"\(meterFilter.prefix(64))\" in the catalogue")
            }
            let limit = try Self.pageSize(query.get("limit"))
            let balances = try await ledger.balances(of: accountID, now: now)
            let openHolds = try await holds.open(of: accountID, now: now)
            var meters: [MeterBody] = []
            for meter in catalogue.meters where meterFilter == nil || meter.id == meterFilter {
                guard let balance = balances.first(where: { $0.meter == meter.id }) else { continue }
                let periods: [UsageBalance.Period]
                switch selection {
                case .all: periods = balance.periods
                case .current: periods = balance.current.map { [$0] } ?? []
                case .starting(let start):
                    periods = balance.periods.filter { $0.start == start }
                    guard !periods.isEmpty else {
                        throw APIError.notFound("no \(meter.id) period starts at \(RFC3339.format(start))")
                    }
                }
                // Entries are paged, newest first: of the selected period, or of every period.
                let span: (from: Date, to: Date) = selection == .all || periods.isEmpty
                    ? (.distantPast, .distantFuture) : (periods[0].start, periods[0].end)
                let page = try await ledger.entries(of: accountID, meter: meter.id, from: span.from, to: span.to, limit: limit, after: cursor)
                let meterHolds = openHolds.filter { $0.meter == meter.id }
                meters.append(
                    MeterBody(
                        balance: UsageView(balance, meter: meter, currency: catalogue.document.currency, held: meterHolds.reduce(0) { $0 + $1.units }),
                        periods: periods, entries: page.entries, nextCursor: page.next.map(Self.encodeCursor), holds: meterHolds))
            }
            return try JSONResponse.make(ListBody(accountID: accountID, meters: meters))
        }
        addHoldRoutes(to: usage)
    }

    /// `POST .../usage/holds`, `POST .../usage/holds/{hold_id}/settle`, `DELETE .../usage/holds/{hold_id}`.
    func addHoldRoutes(to usage: RouterGroup<SubsyncRequestContext>) {
        usage.post("holds") { request, context in
            let accountID = try AccountController.accountID(context)
            try await authorizeWrite(request, accountID: accountID)
            let now = clock.now()
            let body = try await request.collectBody(upTo: 16 * 1024, context: context)
            let ask = try HoldRequest.decode(Data(buffer: body), catalogue: catalogue)
            let reservation: UsageHolds.Reservation
            do {
                reservation = try await holds.reserve(
                    accountID: accountID, device: ask.device, meter: ask.meter, units: ask.units, ttl: TimeInterval(ask.ttlSeconds), now: now)
            } catch let many as UsageHolds.TooManyHolds {
                let seconds = max(1, Int(many.nextExpiry.timeIntervalSince(now).rounded(.up)))
                throw APIError(.tooManyRequests, code: "too_many_holds",
                               message: "this account already has \(many.maximum) open \(ask.meter) holds (SUBSYNC_USAGE_MAX_OPEN_HOLDS); settle or release one, or retry in \(seconds) s",
                               headers: [.retryAfter: String(seconds)])
            }
            guard let hold = reservation.hold else {
                throw APIError(.conflict, code: "usage_exhausted",
                               message: "nothing left of \(ask.meter) to hold (available: 0); buy credits or report the usage afterwards as overage")
            }
            return try JSONResponse.make(HoldBody(hold: hold, granted: hold.units, available: reservation.available), status: .created)
        }
        usage.post("holds/:hold_id/settle") { request, context in
            let accountID = try AccountController.accountID(context)
            try await authorizeWrite(request, accountID: accountID)
            let holdID = try Self.holdID(context)
            let now = clock.now()
            let body = try await request.collectBody(upTo: 16 * 1024, context: context)
            let settlement = try WireBody.decode(SettleRequest.self, from: Data(buffer: body))
            guard (0...UsageUnits.maximum).contains(settlement.units) else {
                throw APIError(.unprocessableContent, code: "invalid_units", message: "units must be 0 to \(UsageUnits.maximum), got \(settlement.units)")
            }
            let at = (settlement.at ?? now).roundedToMicroseconds
            try UsageLimits.check(time: at, now: now, policy: policy, field: "at")
            let hold: UsageHolds.Hold
            do {
                hold = try await Self.mapHoldErrors { try await holds.settle(accountID: accountID, holdID: holdID, units: settlement.units, at: at, now: now) }
            } catch let full as UsageLedger.PeriodFull {
                throw Self.periodFull(full, outcome: "the hold stays open")
            }
            return try JSONResponse.make(SettledBody(hold: hold, usage: try await views(of: accountID, now: now)))
        }
        usage.delete("holds/:hold_id") { request, context in
            let accountID = try AccountController.accountID(context)
            try await authorizeWrite(request, accountID: accountID)
            let holdID = try Self.holdID(context)
            let hold = try await Self.mapHoldErrors { try await holds.release(accountID: accountID, holdID: holdID, now: clock.now()) }
            return try JSONResponse.make(SettledBody(hold: hold, usage: try await views(of: accountID, now: clock.now())))
        }
    }

    /// `422 period_full`: the account's entries in a period are at the bound; `outcome` says what
    /// became of the request.
    static func periodFull(_ full: UsageLedger.PeriodFull, outcome: String) -> APIError {
        APIError(.unprocessableContent, code: "period_full",
                 message: "this account already has \(full.maximum) \(full.meter) entries in the period \(RFC3339.format(full.period.start)) – \(RFC3339.format(full.period.end)) (SUBSYNC_USAGE_MAX_ENTRIES_PER_PERIOD); \(outcome)")
    }

    static func holdID(_ context: SubsyncRequestContext) throws -> UUID {
        guard let text = context.parameters.get("hold_id"), let id = UUID(uuidString: text) else {
            throw APIError(.badRequest, code: "invalid_hold_id", message: "hold_id must be a UUID")
        }
        return id
    }

    static func mapHoldErrors<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch UsageHolds.HoldError.notFound {
            throw APIError(.notFound, code: "hold_not_found", message: "no such hold on this account")
        } catch UsageHolds.HoldError.timeOutsideHold(let createdAt) {
            throw APIError(.unprocessableContent, code: "invalid_time",
                           message: "at must be between the hold's creation (\(RFC3339.format(createdAt))) and now")
        } catch UsageHolds.HoldError.ended(let status) {
            throw APIError(.conflict, code: "hold_ended", message: "the hold is already \(status.rawValue) (with other units, if settled)")
        }
    }

    /// Each meter's balance of `accountID` at `now`, open holds taken off what is available.
    func views(of accountID: String, now: Date) async throws -> [UsageView] {
        guard !catalogue.meters.isEmpty else { return [] }
        let balances = try await ledger.balances(of: accountID, now: now)
        let open = try await holds.open(of: accountID, now: now)
        return zip(balances, catalogue.meters).map { balance, meter in
            UsageView(balance, meter: meter, currency: catalogue.document.currency,
                      held: open.filter { $0.meter == meter.id }.reduce(0) { $0 + $1.units })
        }
    }

    /// `?period=`: `current` (default), `all`, or the RFC 3339 start of one period.
    enum PeriodSelection: Equatable {
        case current, all
        case starting(Date)

        init(_ text: String?) throws {
            switch text {
            case nil, "current": self = .current
            case "all": self = .all
            case .some(let text):
                guard let start = RFC3339.parse(text) else {
                    throw APIError(.badRequest, code: "invalid_request", message: "period must be current, all, or a period's RFC 3339 start")
                }
                self = .starting(start)
            }
        }
    }

    struct SubmissionBody: Encodable {
        var accepted: Int
        var duplicates: Int
        var usage: [UsageView]
    }

    struct MeterBody: Encodable {
        var balance: UsageView
        var periods: [UsageBalance.Period]
        /// A page of the recorded entries, newest first.
        var entries: [UsageEntry]
        /// Pass as `cursor` for the next page; `null` on the last.
        var nextCursor: String?
        var holds: [UsageHolds.Hold]

        enum CodingKeys: String, CodingKey {
            case balance, periods, entries, holds
            case nextCursor = "next_cursor"
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(balance, forKey: .balance)
            try c.encode(periods, forKey: .periods)
            try c.encode(entries, forKey: .entries)
            try c.encode(nextCursor, forKey: .nextCursor)
            try c.encode(holds, forKey: .holds)
        }
    }

    /// Entries a page shows by default, and at most (`?limit=`).
    static let defaultPageSize = 100
    static let maximumPageSize = 1_000

    static func pageSize(_ text: String?) throws -> Int {
        guard let text else { return defaultPageSize }
        guard let size = Int(text), (1...maximumPageSize).contains(size) else {
            throw APIError(.badRequest, code: "invalid_request", message: "limit must be a whole number from 1 to \(maximumPageSize)")
        }
        return size
    }

    /// A cursor is opaque to clients: base64url of `meter`, the entry's time in microseconds and
    /// its id, separated by NUL.
    static func encodeCursor(_ cursor: UsageLedger.EntryCursor) -> String {
        let text = "\(cursor.meter)\u{0}\(cursor.at.microsecondsSince1970)\u{0}\(cursor.entryID)"
        return Data(text.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func decodeCursor(_ text: String) throws -> UsageLedger.EntryCursor {
        let invalid = APIError(.badRequest, code: "invalid_cursor", message: "cursor is not one this service gave (pass next_cursor as it is)")
        guard text.count <= 1_024 else { throw invalid }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let data = Data(base64Encoded: base64), let decoded = String(data: data, encoding: .utf8) else { throw invalid }
        let parts = decoded.split(separator: "\u{0}", maxSplits: 2, omittingEmptySubsequences: false)
        // A time the service can have given: 1970 to 9999 (anything else is not a cursor of ours,
        // and PostgreSQL refuses dates far outside it).
        guard parts.count == 3, let micros = Int64(parts[1]), (0...253_402_300_799_999_999).contains(micros), !parts[0].isEmpty,
            !parts[2].isEmpty
        else { throw invalid }
        return UsageLedger.EntryCursor(
            meter: String(parts[0]), at: Date(timeIntervalSince1970: Double(micros) / 1_000_000), entryID: String(parts[2]))
    }

    struct HoldBody: Encodable {
        var hold: UsageHolds.Hold
        var granted: Int
        var available: Int?

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(hold, forKey: .hold)
            try c.encode(granted, forKey: .granted)
            try c.encode(available, forKey: .available)
        }

        enum CodingKeys: String, CodingKey { case hold, granted, available }
    }

    struct SettledBody: Encodable {
        var hold: UsageHolds.Hold
        var usage: [UsageView]
    }

    struct SettleRequest: Decodable {
        var units: Int
        var at: Date?
    }

    struct ListBody: Encodable {
        var accountID: String
        var meters: [MeterBody]

        enum CodingKeys: String, CodingKey {
            case accountID = "account_id"
            case meters
        }
    }
}
