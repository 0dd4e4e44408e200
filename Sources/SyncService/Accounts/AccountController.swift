import Foundation
import Hummingbird
import Logging
import Postgres
import SyncCore
import SyncStore

/// `/v1/accounts/{account_id}`: sync, read, feature checks.
struct AccountController: Sendable {
    let inbox: ReportInbox
    let reader: AccountReader
    let catalogue: Catalogue
    let authenticator: Authenticator
    /// Raised here so this process's workers start at once.
    let arrivals: WakeSignal
    /// Raised by workers after each committed batch; `wait_ms` waits on it.
    let resolutions: WakeSignal
    let clock: any ServiceClock
    let logger: Logger
    /// Per account and per device; admin callers (the app's backend) are not limited.
    let accountLimiter: RateLimiter?
    let deviceLimiter: RateLimiter?
    /// Reports per account per day (each report costs one token).
    let reportQuota: RateLimiter?
    /// The same limits in PostgreSQL, shared by every process (nil: per process only).
    let sharedLimits: RateBuckets?
    /// Verifies signed transactions and applies `SUBSYNC_REQUIRE_SIGNED`.
    let admission: ReportAdmission
    /// Stores verified reports under the account-binding policy.
    let binder: TransactionBinder
    /// Each account's `appAccountToken`, returned with its state.
    let tokens: AppAccountTokens
    /// The cap of `wait_ms` (`SUBSYNC_MAX_WAIT_MS`).
    let maximumWaitMilliseconds: Int
    /// Each meter's balance, shown with the account.
    let usage: UsageController

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

    /// 429 with Retry-After when the caller's bucket is empty.
    private func checkRate(_ limiter: RateLimiter?, key: String, what: String) async throws {
        guard let limiter, let wait = await limiter.take(key) else { return }
        throw APIError.rateLimited(retryAfter: wait, what: "this \(what)")
    }

    /// The account, device and quota buckets every process shares, in one statement, after this
    /// process's own buckets let the request through: 429 with the longest wait when any is empty.
    private func checkSharedRates(_ shared: RateBuckets, accountID: String, deviceID: String, reports: Int) async throws {
        var asks: [(ask: RateBuckets.Ask, what: String)] = []
        if let limit = accountLimiter?.limit {
            asks.append((.init(key: "account/" + accountID, ratePerSecond: limit.ratePerSecond, burst: limit.burst), "this account"))
        }
        if let limit = deviceLimiter?.limit {
            asks.append((.init(key: "device/" + accountID + "/" + deviceID, ratePerSecond: limit.ratePerSecond, burst: limit.burst), "this device"))
        }
        if let limit = reportQuota?.limit, reports > 0 {
            asks.append((.init(key: "quota/" + accountID, ratePerSecond: limit.ratePerSecond, burst: limit.burst, cost: Double(reports)),
                         "this account today (SUBSYNC_REPORTS_PER_ACCOUNT_PER_DAY)"))
        }
        let refused = try await shared.take(asks.map(\.ask), now: clock.now())
        guard !refused.isEmpty else { return }
        let first = asks.first { refused[$0.ask.key] != nil }
        if first?.ask.key.hasPrefix("quota") == true { ServiceMetrics.reportQuotaRefused.increment() }
        throw APIError.rateLimited(retryAfter: refused.values.max() ?? .seconds(1), what: first?.what ?? "this account")
    }

    private func sync(_ request: Request, context: SubsyncRequestContext, accountID: String) async throws -> Response {
        let principal = try await authenticator.authorize(request, accountID: accountID)
        if !principal.isAdmin { try await checkRate(accountLimiter, key: accountID, what: "account") }
        let waitMilliseconds = try waitParameter(request)
        let body = try await request.collectBody(upTo: SyncLimits.maximumBodyBytes, context: context)
        let (device, payloads) = try SyncRequest.decode(Data(buffer: body))
        if !principal.isAdmin { try await checkRate(deviceLimiter, key: accountID + "\u{0}" + device.id, what: "device") }
        if !principal.isAdmin, let reportQuota, let wait = await reportQuota.take(accountID, cost: Double(payloads.count)) {
            ServiceMetrics.reportQuotaRefused.increment()
            throw APIError.rateLimited(retryAfter: wait, what: "this account today (SUBSYNC_REPORTS_PER_ACCOUNT_PER_DAY)")
        }
        if !principal.isAdmin, let sharedLimits {
            try await checkSharedRates(sharedLimits, accountID: accountID, deviceID: device.id, reports: payloads.count)
        }

        let admitted = try await admission.admit(payloads, accountID: accountID, deviceID: device.id)
        let submission: ReportInbox.Submission
        if admitted.claims.isEmpty {
            // Nothing to bind: the one-statement inbox write.
            submission = try await inbox.submit(accountID: accountID, device: device, reports: admitted.reports, seenAt: clock.now())
        } else {
            submission = try await submitBound(accountID: accountID, device: device, admitted: admitted)
        }
        ServiceMetrics.reportsAccepted.increment(by: submission.accepted.count)
        ServiceMetrics.reportsDuplicate.increment(by: submission.duplicates.count)
        if !submission.accepted.isEmpty { await arrivals.signal() }

        let ids = submission.accepted + submission.duplicates
        var resolved = ids.isEmpty
        if !resolved, waitMilliseconds > 0 {
            resolved = try await waitUntilResolved(accountID: accountID, reportIDs: ids, milliseconds: waitMilliseconds)
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

    /// Stores reports with verified purchases under the binding policy; a conflict under
    /// `reject` is a 409 that names the purchase but not the other account.
    private func submitBound(accountID: String, device: DeviceInfo, admitted: ReportAdmission.Admitted) async throws -> ReportInbox.Submission {
        do {
            let outcome = try await binder.submit(
                accountID: accountID, device: device, reports: admitted.reports, claims: admitted.claims, seenAt: clock.now())
            if !outcome.transfers.isEmpty { ServiceMetrics.bindingConflicts(.transferred).increment(by: outcome.transfers.count) }
            for transfer in outcome.transfers {
                logger.notice("purchase transferred between accounts", metadata: [
                    "original_transaction_id": "\(transfer.originalTransactionID)",
                    "from": "\(transfer.fromAccountID)", "to": "\(transfer.toAccountID)",
                ])
            }
            return outcome.submission
        } catch let conflict as BindingConflict {
            ServiceMetrics.bindingConflicts(.rejected).increment()
            logger.notice("purchase bound to another account refused", metadata: [
                "original_transaction_id": "\(conflict.originalTransactionID)", "by": "\(conflict.reason.rawValue)",
            ])
            let what = conflict.reason == .purchase ? "belongs to another account" : "carries an appAccountToken of another account"
            throw APIError(
                .conflict, code: "purchase_bound_to_another_account",
                message: "the purchase with original transaction id \(conflict.originalTransactionID) \(what); nothing was stored")
        }
    }

    private func waitParameter(_ request: Request) throws -> Int {
        guard let text = request.uri.queryParameters.get("wait_ms") else { return 0 }
        guard let value = Int(text), value >= 0 else {
            throw APIError(.badRequest, code: "invalid_request", message: "wait_ms must be a whole number of milliseconds")
        }
        return min(value, maximumWaitMilliseconds)
    }

    /// Waits until none of the reports is pending, or the time is up. Wakes on this process's
    /// workers' signal and polls every 100 ms for workers of other processes (more often would
    /// take database connections from the workers that must resolve these very reports).
    private func waitUntilResolved(accountID: String, reportIDs: [String], milliseconds: Int) async throws -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(milliseconds)
        while true {
            let seen = await resolutions.current
            if try await inbox.pendingCount(accountID: accountID, reportIDs: reportIDs) == 0 { return true }
            let remaining = deadline - ContinuousClock.now
            if remaining <= .zero { return false }
            await resolutions.wait(after: seen, timeout: min(remaining, .milliseconds(100)))
        }
    }
}
