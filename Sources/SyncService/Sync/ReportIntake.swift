import Foundation
import Logging
import SyncCore
import SyncStore

/// Takes a sync request's reports in: admits them (signatures, `SUBSYNC_REQUIRE_SIGNED`),
/// stores them (under the account-binding policy when they name a verified purchase), wakes
/// this process's workers, and waits for their resolution when the device asks to.
struct ReportIntake: Sendable {
    let inbox: ReportInbox
    /// Verifies signed transactions and applies `SUBSYNC_REQUIRE_SIGNED`.
    let admission: ReportAdmission
    /// Stores verified reports under the account-binding policy.
    let binder: TransactionBinder
    /// Raised here so this process's workers start at once.
    let arrivals: WakeSignal
    /// Raised by workers after each committed batch; `wait_ms` waits on it.
    let resolutions: WakeSignal
    /// The cap of `wait_ms` (`SUBSYNC_MAX_WAIT_MS`).
    let maximumWaitMilliseconds: Int
    let clock: any ServiceClock
    let logger: Logger

    /// Admits and stores `payloads`; a purchase bound to another account under `reject` is a
    /// 409 that names the purchase but not the other account, and stores nothing.
    func submit(_ payloads: [ReportPayload], accountID: String, device: DeviceInfo) async throws -> ReportInbox.Submission {
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
        return submission
    }

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

    /// Waits until none of the reports is pending, or `milliseconds` are up. Wakes on
    /// this process's workers' signal and polls every 100 ms for workers of other processes (more
    /// often would take database connections from the workers that must resolve these very
    /// reports).
    func waitUntilResolved(accountID: String, reportIDs: [String], milliseconds: Int) async throws -> Bool {
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
