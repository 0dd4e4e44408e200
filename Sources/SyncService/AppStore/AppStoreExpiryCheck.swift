import Foundation
import Logging
import SyncCore
import SyncStore

/// Asks the App Store before the sweeper takes access away (docs/STORE.md, "Before an expiry"):
/// for each auto-renewable subscription whose access has just ended, Get All Subscription
/// Statuses for its original transaction; a renewal (or a refund) the service missed is written
/// as a verified store report, and the account's expiry is held until the workers resolve it, so
/// the user never sees the paywall.
///
/// Two parts, so the sweep never waits on the network: the sweeper calls ``holdUnanswered()``
/// (the database only) right before it applies expiries, and ``AppStoreExpiryQuestions`` asks the
/// questions (``askDue()``) in a loop of its own. An answer ends its hold: "expired" (or a
/// subscription the store does not know) is applied by the next sweep, seconds later.
///
/// Bounded: one answered question per transaction and expiry (`store_expiry_checks`), at most
/// ``batch`` questions a pass, one deadline per pass that cancels the question in flight, under
/// the API's rate limit; a question that fails or times out rotates behind the others. An expiry
/// whose question is not answered yet is held and asked again at most once a minute, but never
/// longer than ``bound`` after it: then it is applied, and the notification backfill corrects it
/// when the store speaks again.
public struct AppStoreExpiryCheck: Sendable {
    let api: AppStoreServerAPI
    let verifier: StoreKitVerifier
    let binder: TransactionBinder
    let checks: AppStoreExpiryChecks
    let catalogue: Catalogue
    let clock: any ServiceClock
    let logger: Logger

    typealias Outcome = AppStoreExpiryChecks.Outcome

    /// The longest an expiry waits for the store's answer.
    public static let bound: TimeInterval = 15 * 60
    /// How soon a failed question is asked again (and how long an unanswered expiry is held).
    static let retryAfter: TimeInterval = 60
    /// How long an account with a new store report is held for the workers to resolve it.
    static let resolutionHold: TimeInterval = 120
    /// Questions per pass (a backlog waits, held).
    static let batch = 200

    public init(
        api: AppStoreServerAPI, verifier: StoreKitVerifier, binder: TransactionBinder, catalogue: Catalogue, clock: any ServiceClock,
        logger: Logger
    ) {
        self.api = api
        self.verifier = verifier
        self.binder = binder
        self.checks = AppStoreExpiryChecks(pool: binder.pool)
        self.catalogue = catalogue
        self.clock = clock
        self.logger = logger
    }

    /// What one pass of questions did.
    struct PassOutcome: Equatable {
        var asked = 0
        var renewed = 0
        var failed = 0
    }

    /// How long one pass may ask: at the deadline the question in flight is cancelled (recorded
    /// as failed) and the rest wait, held, for the next pass.
    static let passDuration: Duration = .seconds(20)
    /// How far ahead of its clock a hold reaches: expiries that come while the sweep runs.
    static let lookahead: TimeInterval = 5
    /// The most accounts one sweep holds (the earliest ends first).
    static let maximumHolds = 2_000

    var products: [String] {
        catalogue.products.values.filter { $0.kind == .autoRenewable }.map(\.id).sorted()
    }

    /// Holds every expiry due now (or within ``lookahead``) whose question has no answer yet, so
    /// the sweep that follows does not apply it. The database only: never waits on the store.
    func holdUnanswered() async {
        let products = self.products
        guard !products.isEmpty else { return }
        do {
            try await checks.holdUnanswered(
                products: products, now: clock.now().addingTimeInterval(Self.lookahead), bound: Self.bound, retryAfter: Self.retryAfter,
                limit: Self.maximumHolds)
        } catch {
            logger.warning("could not hold expiries the App Store has not answered; they proceed", metadata: ["error": "\(error)"])
        }
    }

    /// One pass of questions: asks about the expiries due now, writes what the store says, and
    /// ends the hold of each answered one.
    @discardableResult
    func askDue() async -> PassOutcome {
        var outcome = PassOutcome()
        let products = self.products
        guard !products.isEmpty else { return outcome }
        let answers = AppStoreAnswers(api: api, verifier: verifier, binder: binder)
        let deadline = clock.uptime() + Self.passDuration
        do {
            let due = try await checks.due(
                products: products, now: clock.now(), bound: Self.bound, retryAfter: Self.retryAfter, limit: Self.batch)
            for candidate in due {
                guard clock.uptime() < deadline else { break }
                // One process asks; the others see the claim.
                guard try await checks.claim(candidate, now: clock.now(), retryAfter: Self.retryAfter) else { continue }
                outcome.asked += 1
                let answer: Outcome
                var stopPass = false
                do {
                    answer = try await ask(candidate, answers: answers, deadline: deadline)
                } catch let error as TransactionBinder.NotOwned {
                    // Final: the account does not own the purchase, so the store's answer is not
                    // its to take; the expiry stands.
                    logger.warning("asked the App Store about a purchase the account does not own", metadata: [
                        "account_id": "\(candidate.accountID)", "error": "\(error)",
                    ])
                    answer = .notOwned
                } catch {
                    outcome.failed += 1
                    logger.notice("could not ask the App Store before an expiry; held, asked again", metadata: [
                        "account_id": "\(candidate.accountID)", "original_transaction_id": "\(candidate.originalTransactionID)",
                        "error": "\(error)",
                    ])
                    answer = .failed
                    // A pass that ran out of time, or a store that is slow or asks to wait: the
                    // rest wait for the next pass (this question rotates behind them).
                    stopPass = error is PassDeadline || Self.pausesThePass(error)
                }
                if answer == .renewed || answer == .revoked {
                    outcome.renewed += 1
                    do {
                        try await checks.hold(candidate.accountID, until: clock.now().addingTimeInterval(Self.resolutionHold), now: clock.now())
                    } catch {
                        logger.warning("could not hold an expiry for the store's report", metadata: ["error": "\(error)"])
                    }
                }
                try await checks.record(candidate, outcome: answer)
                if answer == .unchanged || answer == .notOwned {
                    // The expiry stands: applied by the next sweep, not at the hold's end.
                    try await checks.lift(
                        candidate, products: products, now: clock.now(), horizon: clock.now().addingTimeInterval(Self.lookahead),
                        bound: Self.bound)
                }
                if stopPass { break }
                if answer == .failed, await api.isPaused("subscriptions") { break }
            }
        } catch {
            logger.warning("asking the App Store before expiries failed", metadata: ["error": "\(error)"])
        }
        return outcome
    }

    /// The question in flight ran past its pass's deadline and was cancelled.
    struct PassDeadline: Error, CustomStringConvertible {
        var description: String { "no answer within the pass's \(AppStoreExpiryCheck.passDuration)" }
    }

    /// Whether a failed question ends the pass: the store timed out or asked to wait.
    static func pausesThePass(_ error: any Error) -> Bool {
        switch error as? AppStoreAPIError {
        case .timedOut?, .rateLimited?: true
        default: false
        }
    }

    /// Get All Subscription Statuses, cancelled at `deadline` (on the service's clock).
    private func statuses(_ transactionID: String, deadline: Duration) async throws -> AppStoreAPI.StatusResponse? {
        let remaining = deadline - clock.uptime()
        guard remaining > .zero else { throw PassDeadline() }
        let (api, clock) = (self.api, self.clock)
        return try await withThrowingTaskGroup(of: AppStoreAPI.StatusResponse??.self) { group in
            group.addTask { .some(try await api.subscriptionStatuses(transactionID: transactionID)) }
            group.addTask {
                // What is left when this task starts, not when it was added: a deadline on the
                // clock, however late the task runs (a test's clock moves meanwhile).
                try await clock.sleep(for: clock.remaining(until: deadline))
                return nil  // the deadline: no answer (not "the store does not know it")
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let answered = first else { throw PassDeadline() }
            return answered
        }
    }

    /// Asks about one expiry: `renewed` / `revoked` (a store report was written) or `unchanged`
    /// (the store agrees, or does not know the subscription: the expiry stands). Only the
    /// question itself races the deadline; what the store said is written whole.
    private func ask(_ candidate: AppStoreExpiryChecks.Candidate, answers: AppStoreAnswers, deadline: Duration) async throws -> Outcome {
        guard let statuses = try await statuses(candidate.originalTransactionID, deadline: deadline) else { return .unchanged }
        for last in statuses.data.flatMap(\.lastTransactions) where last.originalTransactionId == candidate.originalTransactionID {
            guard let jws = last.signedTransactionInfo else { continue }
            let made: Report?
            do {
                made = try await answers.report(transaction: jws, renewal: last.signedRenewalInfo, originals: [candidate.originalTransactionID])
            } catch {
                logger.warning("a signed answer of the App Store did not verify; ignored", metadata: ["error": "\(error)"])
                continue
            }
            guard let report = made else { continue }
            let ends = [report.expiresAt, report.gracePeriodExpiresAt].compactMap { $0 }.max()
            // Later by a millisecond at least: StoreKit dates are whole milliseconds, and the
            // stored end went through the database's microseconds.
            let renewed = ends.map { $0.timeIntervalSince(candidate.expiresAt) >= 0.001 } ?? false
            // A renewal or a refund the service missed is taken; so is the reason the store gives
            // for the end (its renewal info's expirationIntent), which changes no access.
            guard renewed || report.revokedAt != nil
                || report.renewal?.expirationReason != nil
            else { continue }
            // Renewal details win by signing time: named by this answer, so a statement the store
            // made before (and something else since) is not a duplicate. Asked once per period.
            let named = report.renewal == nil ? report : (try? AppStoreAnswers.answerNamed(report)) ?? report
            let ingested = try await answers.ingest([named], accountID: candidate.accountID)
            if !ingested.taken.isEmpty {
                logger.error("the App Store's answer before an expiry was not written: another report holds its id", metadata: [
                    "account_id": "\(candidate.accountID)", "report_id": "\(named.reportID)",
                ])
            }
            let outcome: Outcome = report.revokedAt != nil ? .revoked : renewed ? .renewed : .unchanged
            logger.info("the App Store answered before an expiry", metadata: [
                "account_id": "\(candidate.accountID)", "transaction_id": "\(report.transactionID)", "outcome": "\(outcome.rawValue)",
            ])
            return outcome
        }
        return .unchanged
    }
}
