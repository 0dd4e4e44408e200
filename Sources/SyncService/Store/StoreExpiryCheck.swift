import Foundation
import Logging
import SyncCore
import SyncStore

/// Asks the App Store before the sweeper takes access away (docs/STORE.md, "Before an expiry"):
/// for each auto-renewable subscription whose access has just ended, Get All Subscription
/// Statuses for its original transaction; a renewal (or a refund) the service missed is written
/// as a verified store report, and the account's expiry is held until the workers resolve it, so
/// the user never sees the paywall. The expiry sweeper runs it before every sweep.
///
/// Bounded: one answered question per transaction and expiry (`store_expiry_checks`), at most
/// ``batch`` questions a sweep in order of expiry, under the API's process-wide rate limit; an
/// expiry whose question is not answered yet (not asked, the store down or rate-limited) is held
/// and asked again at most once a minute, but never longer than ``bound`` after it: then it is
/// applied, and the notification backfill corrects it when the store speaks again.
public struct StoreExpiryCheck: Sendable {
    let api: AppStoreServerAPI
    let verifier: StoreKitVerifier
    let binder: TransactionBinder
    let checks: StoreExpiryChecks
    let catalogue: Catalogue
    let clock: any ServiceClock
    let logger: Logger

    /// The longest an expiry waits for the store's answer.
    public static let bound: TimeInterval = 15 * 60
    /// How soon a failed question is asked again (and how long an unanswered expiry is held).
    static let retryAfter: TimeInterval = 60
    /// How long an account with a new store report is held for the workers to resolve it.
    static let resolutionHold: TimeInterval = 120
    /// Questions per sweep (a backlog waits, held, in order of expiry).
    static let batch = 200

    public init(
        api: AppStoreServerAPI, verifier: StoreKitVerifier, binder: TransactionBinder, catalogue: Catalogue, clock: any ServiceClock,
        logger: Logger
    ) {
        self.api = api
        self.verifier = verifier
        self.binder = binder
        self.checks = StoreExpiryChecks(pool: binder.pool)
        self.catalogue = catalogue
        self.clock = clock
        self.logger = logger
    }

    /// What one pass did.
    struct Outcome: Equatable {
        var asked = 0
        var renewed = 0
        var failed = 0
    }

    /// How long one pass may ask before it leaves the rest, held, to the next sweep.
    static let passDuration: Duration = .seconds(20)
    /// How far ahead of its clock a pass holds what ends: expiries that come while the sweep runs.
    static let lookahead: TimeInterval = 5
    /// The most accounts one pass holds (the earliest ends first).
    static let maximumHolds = 2_000

    /// Asks about the expiries due now, writes what the store says, and holds what is unanswered.
    @discardableResult
    func run() async -> Outcome {
        var outcome = Outcome()
        let products = catalogue.products.values.filter { $0.kind == .autoRenewable }.map(\.id).sorted()
        guard !products.isEmpty else { return outcome }
        let answers = StoreAnswers(api: api, verifier: verifier, binder: binder)
        let started = clock.uptime()
        do {
            let due = try await checks.due(
                products: products, now: clock.now(), bound: Self.bound, retryAfter: Self.retryAfter, limit: Self.batch)
            for candidate in due {
                guard clock.uptime() - started < Self.passDuration else { break }
                // One process asks; the others see the claim.
                guard try await checks.claim(candidate, now: clock.now(), retryAfter: Self.retryAfter) else { continue }
                outcome.asked += 1
                var answer: String
                do {
                    answer = try await ask(candidate, answers: answers)
                } catch let error as StoreAnswers.NotOwned {
                    // Final: the account does not own the purchase, so the store's answer is not
                    // its to take; the expiry stands.
                    logger.warning("asked the App Store about a purchase the account does not own", metadata: [
                        "account_id": "\(candidate.accountID)", "error": "\(error)",
                    ])
                    answer = "not_owned"
                } catch {
                    outcome.failed += 1
                    logger.notice("could not ask the App Store before an expiry; held, asked again", metadata: [
                        "account_id": "\(candidate.accountID)", "original_transaction_id": "\(candidate.originalTransactionID)",
                        "error": "\(error)",
                    ])
                    answer = "failed"
                }
                if answer == "renewed" || answer == "revoked" {
                    outcome.renewed += 1
                    do {
                        try await checks.hold(candidate.accountID, until: clock.now().addingTimeInterval(Self.resolutionHold), now: clock.now())
                    } catch {
                        logger.warning("could not hold an expiry for the store's report", metadata: ["error": "\(error)"])
                    }
                }
                try await checks.record(candidate, outcome: answer)
                if answer == "failed", await api.isPaused("subscriptions") { break }
            }
        } catch {
            logger.warning("asking the App Store before expiries failed", metadata: ["error": "\(error)"])
        }
        do {
            try await checks.holdUnanswered(
                products: products, now: clock.now().addingTimeInterval(Self.lookahead), bound: Self.bound, retryAfter: Self.retryAfter,
                limit: Self.maximumHolds)
        } catch {
            logger.warning("could not hold expiries the App Store has not answered; they proceed", metadata: ["error": "\(error)"])
        }
        return outcome
    }

    /// Asks about one expiry: `renewed` / `revoked` (a store report was written) or `unchanged`
    /// (the store agrees: the expiry stands).
    private func ask(_ candidate: StoreExpiryChecks.Candidate, answers: StoreAnswers) async throws -> String {
        guard let statuses = try await api.subscriptionStatuses(transactionID: candidate.originalTransactionID) else { return "unchanged" }
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
            let renewed = ends.map { $0 > candidate.expiresAt } ?? false
            // A renewal or a refund the service missed is taken; so is the reason the store gives
            // for the end (its renewal info's expirationIntent), which changes no access.
            guard renewed || report.revokedAt != nil
                || report.renewal?.expirationReason != nil
            else { continue }
            // Renewal details win by signing time: named by this answer, so a statement the store
            // made before (and something else since) is not a duplicate. Asked once per period.
            let named = report.renewal == nil ? report : (try? StoreAnswers.answerNamed(report)) ?? report
            _ = try await answers.ingest([named], accountID: candidate.accountID)
            let outcome = report.revokedAt != nil ? "revoked" : renewed ? "renewed" : "unchanged"
            logger.info("the App Store answered before an expiry", metadata: [
                "account_id": "\(candidate.accountID)", "transaction_id": "\(report.transactionID)", "outcome": "\(outcome)",
            ])
            return outcome
        }
        return "unchanged"
    }
}
