import Foundation
import Hummingbird
import Postgres
import SyncCore
import SyncStore

/// `/v1/accounts/{account_id}/usage`: devices report what they consumed; devices and backends
/// read balances, periods and entries (docs/USAGE.md).
struct UsageController: Sendable {
    let ledger: UsageLedger
    let catalogue: Catalogue
    let authenticator: Authenticator
    let clock: any ServiceClock

    func addRoutes(to router: Router<SubsyncRequestContext>) {
        let usage = router.group("v1/accounts/:account_id/usage")
        usage.post { request, context in
            let accountID = try AccountController.accountID(context)
            _ = try await authenticator.authorize(request, accountID: accountID)
            let now = clock.now()
            let body = try await request.collectBody(upTo: UsageLimits.maximumBodyBytes, context: context)
            let (device, entries) = try UsageRequest.decode(Data(buffer: body), catalogue: catalogue, now: now)
            let submission: UsageLedger.Submission
            do {
                submission = try await ledger.submit(entries, accountID: accountID, deviceID: device.id, now: now)
            } catch let conflict as UsageLedger.Conflict {
                throw APIError(.conflict, code: "usage_conflict",
                               message: "usage id \"\(conflict.usageID.dropFirst("usage:".count))\" is already stored with other units or another time; nothing was stored")
            }
            return try JSONResponse.make(
                SubmissionBody(accepted: submission.accepted, duplicates: submission.duplicates, usage: try await views(of: accountID, now: now)),
                status: .accepted)
        }
        usage.get { request, context in
            let accountID = try AccountController.accountID(context)
            _ = try await authenticator.authorize(request, accountID: accountID)
            let now = clock.now()
            let selection = try PeriodSelection(request.uri.queryParameters.get("period"))
            let meterFilter = request.uri.queryParameters.get("meter")
            if let meterFilter, catalogue.meter(id: meterFilter) == nil {
                throw APIError(.unprocessableContent, code: "unknown_meter", message: "no meter \"\(meterFilter.prefix(64))\" in the catalogue")
            }
            let entries = try await ledger.entries(of: accountID, meter: meterFilter)
            var meters: [MeterBody] = []
            for meter in catalogue.meters where meterFilter == nil || meter.id == meterFilter {
                let balance = UsageBalance.compute(meter: meter.id, entries: entries, now: now)
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
                let shown = entries.filter { entry in
                    entry.meter == meter.id && (selection == .all || periods.contains { $0.start <= entry.at && entry.at < $0.end })
                }
                meters.append(MeterBody(balance: UsageView(balance, meter: meter, currency: catalogue.document.currency), periods: periods, entries: shown))
            }
            return try JSONResponse.make(ListBody(accountID: accountID, meters: meters))
        }
    }

    /// Each meter's balance of `accountID` at `now`.
    func views(of accountID: String, now: Date) async throws -> [UsageView] {
        guard !catalogue.meters.isEmpty else { return [] }
        let balances = try await ledger.balances(of: accountID, now: now)
        return zip(balances, catalogue.meters).map { UsageView($0, meter: $1, currency: catalogue.document.currency) }
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
        var entries: [UsageEntry]
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
