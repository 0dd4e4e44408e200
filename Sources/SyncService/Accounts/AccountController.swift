import Foundation
import Hummingbird
import Logging
import Postgres
import SyncCore
import SyncStore

/// `/v1/accounts/{account_id}`: sync, read, feature checks.
struct AccountController: Sendable {
    let authenticator: Authenticator
    let catalogue: Catalogue
    let reader: AccountReader
    /// Each account's `appAccountToken`, returned with its state.
    let tokens: AppAccountTokens
    let limits: SyncRateLimits
    let intake: ReportIntake
    /// Each meter's balance, shown with the account.
    let usage: UsageController
    let clock: any ServiceClock

    func addRoutes(to router: Router<SubsyncRequestContext>) {
        let accounts = router.group("v1/accounts/:account_id")
        accounts.post("sync") { request, context in
            try await sync(request, context: context, accountID: try Self.accountID(context))
        }
        accounts.get { request, context in
            let accountID = try Self.accountID(context)
            _ = try await authenticator.authorize(request, accountID: accountID)
            let now = clock.now()
            let snapshot = try await reader.snapshot(accountID: accountID, now: now)
            return try JSONResponse.make(
                AccountResponse(snapshot: snapshot, appAccountToken: tokens.token(for: accountID), usage: try await usage.views(of: accountID, now: now)))
        }
        accounts.get("features/:feature") { request, context in
            let accountID = try Self.accountID(context)
            _ = try await authenticator.authorize(request, accountID: accountID)
            let feature = context.parameters.get("feature") ?? ""
            let snapshot = try await reader.snapshot(accountID: accountID, now: clock.now())
            do {
                return try JSONResponse.make(try catalogue.check(feature: feature, state: snapshot.state))
            } catch {
                throw APIError(.notFound, code: "unknown_feature", message: "the catalogue has no feature named \"\(feature.prefix(64))\"")
            }
        }
    }

    /// The path's account id, checked.
    static func accountID(_ context: some RequestContext) throws -> String {
        guard let accountID = context.parameters.get("account_id"), Identifier.isValid(accountID) else {
            throw APIError(.badRequest, code: "invalid_account_id", message: "account_id must be 1–128 characters of letters, digits and ._:@-")
        }
        guard !Identifier.isBlockedAccountID(accountID) else {
            throw APIError(.badRequest, code: "blocked_account_id",
                           message: "\"\(accountID)\" is not a real account id (an unset value on the client?)")
        }
        return accountID
    }

    private func sync(_ request: Request, context: SubsyncRequestContext, accountID: String) async throws -> Response {
        let principal = try await authenticator.authorize(request, accountID: accountID)
        if !principal.isAdmin { try await limits.checkAccount(accountID) }
        let waitMilliseconds = try waitParameter(request)
        let body = try await request.collectBody(upTo: SyncLimits.maximumBodyBytes, context: context)
        let (device, payloads) = try SyncRequest.decode(Data(buffer: body))
        if !principal.isAdmin { try await limits.checkReports(accountID: accountID, deviceID: device.id, reports: payloads.count) }
        let submission = try await intake.submit(payloads, accountID: accountID, device: device)

        let ids = submission.accepted + submission.duplicates
        var resolved = ids.isEmpty
        if !resolved, waitMilliseconds > 0 {
            resolved = try await intake.waitUntilResolved(accountID: accountID, reportIDs: ids, milliseconds: waitMilliseconds)
        }
        // The answer's state and whether the request's reports are resolved come from one
        // statement (and one database snapshot): without `wait_ms`, a sync is two round trips.
        let (snapshot, pendingOfThese) = try await reader.snapshot(
            accountID: accountID, now: clock.now(), countingPending: resolved ? [] : ids)
        if !resolved { resolved = pendingOfThese == 0 }
        return try JSONResponse.make(
            SyncResponse(
                accepted: submission.accepted.count,
                duplicates: submission.duplicates.count,
                resolved: resolved,
                account: AccountResponse(snapshot: snapshot, appAccountToken: tokens.token(for: accountID))
            ),
            status: .accepted
        )
    }

    private func waitParameter(_ request: Request) throws -> Int {
        guard let text = request.uri.queryParameters.get("wait_ms") else { return 0 }
        guard let value = Int(text), value >= 0 else {
            throw APIError(.badRequest, code: "invalid_request", message: "wait_ms must be a whole number of milliseconds")
        }
        return min(value, intake.maximumWaitMilliseconds)
    }
}
