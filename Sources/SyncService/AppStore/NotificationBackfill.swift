import Foundation
import Logging
import NIOConcurrencyHelpers
import Postgres
import ServiceLifecycle
import SyncCore
import SyncStore

/// Recovers App Store Server Notifications that never arrived (docs/STORE.md, "Backfill"): every
/// `interval` it asks Get Notification History from its checkpoint (less an overlap) to now and
/// hands each notification to the same code as `POST /v1/notifications/apple`, which applies it
/// once per `notificationUUID`, so the overlap and notifications that did arrive cost nothing.
///
/// One process of all `serve`s runs it at a time (a lease in `store_backfill`, renewed per page);
/// the checkpoint moves a window at a time, after the window was read through, so a process killed
/// half-way leaves it where it was and the next run asks again (what was applied is a duplicate
/// then). A window that cannot be read holds the checkpoint, not the windows after it, and is
/// skipped, loudly, once it failed in ``skipAfter`` runs while they read. A run never asks
/// for more than Apple keeps (180 days), and a first run looks back ``firstLookback``.
public struct NotificationBackfill: Service {
    let api: AppStoreServerAPI
    let notifications: NotificationController
    let checkpoints: AppStoreBackfillCheckpoint
    let interval: Duration
    let clock: any ServiceClock
    let logger: Logger
    /// This process's name in the lease.
    let owner: String

    /// How far back the window starts before the checkpoint (notifications Apple records with a
    /// slight delay, clocks that disagree).
    static let overlap: TimeInterval = 10 * 60
    /// The first run's window, when there is no checkpoint yet.
    static let firstLookback: TimeInterval = 24 * 3600
    /// Apple keeps 180 days of history; a window starts no earlier than this before now.
    static let maximumLookback: TimeInterval = 179 * 86_400
    /// The most pages one window reads (20 notifications a page).
    static let maximumPages = 10_000
    /// The longest window asked at once (checkpointed after each).
    static let window: TimeInterval = 86_400
    /// In how many runs a window may fail, while the store answers the windows after it, before
    /// it is skipped.
    static let skipAfter = 3

    /// The most pages one window reads (``maximumPages``; less in tests).
    let maximumPages: Int
    /// The window that failed while later ones read, by its start: in how many runs. This
    /// process's count: a new holder of the lease counts from nothing.
    private let failing = NIOLockedValueBox<[Date: Int]>([:])

    init(
        api: AppStoreServerAPI, notifications: NotificationController, checkpoints: AppStoreBackfillCheckpoint, interval: Duration,
        clock: any ServiceClock, logger: Logger, owner: String = UUID().uuidString, maximumPages: Int = Self.maximumPages
    ) {
        self.api = api
        self.notifications = notifications
        self.checkpoints = checkpoints
        self.interval = interval
        self.clock = clock
        self.logger = logger
        self.owner = owner
        self.maximumPages = maximumPages
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await runOnce()
                try? await clock.sleep(for: interval)
            }
        }
        try? await checkpoints.release(owner: owner)
    }

    /// What one run did.
    struct Outcome: Equatable {
        var leased = false
        var pages = 0
        var notifications = 0
        var applied = 0
        var refused = 0
        /// Windows that could not be read (the first holds the checkpoint).
        var failed = 0
        /// Windows given up on (``NotificationBackfill/skipAfter``).
        var skipped = 0
        /// Every window was read through and the checkpoint is at the run's end.
        var completed = false
    }

    /// One run: lease, ask page by page, hand every notification on, advance the checkpoint.
    @discardableResult
    func runOnce() async -> Outcome {
        var outcome = Outcome()
        let now = clock.now()
        // The lease lasts two intervals (at least 10 minutes): renewed on every page, it outlives
        // a slow run, and a process that died frees it within that.
        let leaseFor = max(2 * Double(interval.components.seconds), 600)
        do {
            guard let state = try await checkpoints.lease(owner: owner, now: now, duration: leaseFor) else { return outcome }
            outcome.leased = true
            var start = max((state.checkpoint ?? now.addingTimeInterval(-Self.firstLookback)).addingTimeInterval(-Self.overlap),
                            now.addingTimeInterval(-Self.maximumLookback))
            // The first window of this run that could not be read (the checkpoint stays at its
            // start), and up to where the windows after it were read through.
            var stuck: (start: Date, end: Date, error: String)?
            var readAfterStuck: Date?
            // A day at a time, each checkpointed when read through: a long outage is caught up
            // piece by piece, and one piece that cannot be read does not hold the others back.
            while start < now {
                let end = min(start.addingTimeInterval(Self.window), now)
                do {
                    guard try await read(from: start, to: end, leaseFor: leaseFor, outcome: &outcome) else {
                        logger.notice("App Store notification backfill: another process took the lease; stopping this run")
                        return outcome
                    }
                } catch {
                    if Task.isCancelled { return outcome }
                    outcome.failed += 1
                    ServiceMetrics.backfillWindows(.failed).increment()
                    logger.warning("App Store notification backfill could not read a window", metadata: [
                        "start": "\(RFC3339.format(start))", "end": "\(RFC3339.format(end))", "error": "\(error)",
                    ])
                    // A second window failing too: the store (or the database) is failing, not one window.
                    guard stuck == nil else { break }
                    stuck = (start, end, "\(error)")
                    start = end
                    continue
                }
                ServiceMetrics.backfillWindows(.read).increment()
                if stuck == nil {
                    outcome.completed = try await checkpoints.advance(owner: owner, to: end, notifications: outcome.notifications, now: clock.now())
                    outcome.notifications = 0
                    guard outcome.completed else { return outcome }
                } else {
                    readAfterStuck = end
                }
                start = end
            }
            if let stuck {
                outcome.completed = false
                try await giveUpOrKeep(stuck, readAfter: readAfterStuck, outcome: &outcome)
            } else {
                failing.withLockedValue { $0.removeAll() }
            }
            if outcome.applied + outcome.refused + outcome.failed > 0 {
                logger.notice("App Store notification backfill", metadata: [
                    "applied": "\(outcome.applied)", "refused": "\(outcome.refused)", "pages": "\(outcome.pages)",
                    "failed_windows": "\(outcome.failed)", "skipped_windows": "\(outcome.skipped)",
                ])
            }
        } catch {
            logger.warning("App Store notification backfill failed; the checkpoint stays, the next run asks again", metadata: ["error": "\(error)"])
            try? await checkpoints.failed(owner: owner, error: "\(error)", now: clock.now())
        }
        return outcome
    }

    /// After a run in which the window `stuck` could not be read: the checkpoint stays at its start
    /// and the next run asks again, unless it has now failed in ``skipAfter`` runs while the store
    /// answered the windows after it (read through to `readAfter`; a run in which they failed too
    /// counts neither way). Then it is skipped: the checkpoint moves past it, and it is said as
    /// an error, counted (`subsync_appstore_backfill_windows_total{outcome="skipped"}`) and kept in
    /// `last_error`, so that an operator can ask the store another way (`subsync reconcile
    /// --against-store --all`). A window that fails for good holds the checkpoint for a few runs,
    /// never for ever, and the windows after it are read meanwhile.
    private func giveUpOrKeep(_ stuck: (start: Date, end: Date, error: String), readAfter: Date?, outcome: inout Outcome) async throws {
        let window = "[\(RFC3339.format(stuck.start)), \(RFC3339.format(stuck.end)))"
        let runs = failing.withLockedValue { failing in
            // Only this window's run of failures counts: another start means it moved on.
            let runs = (failing[stuck.start] ?? 0) + (readAfter == nil ? 0 : 1)
            failing = [stuck.start: runs]
            return runs
        }
        guard let readAfter, runs >= Self.skipAfter else {
            try await checkpoints.failed(owner: owner, error: "window \(window) could not be read: \(stuck.error)", now: clock.now())
            return
        }
        guard try await checkpoints.advance(owner: owner, to: readAfter, notifications: outcome.notifications, now: clock.now()) else { return }
        outcome.notifications = 0
        outcome.skipped += 1
        failing.withLockedValue { $0.removeAll() }
        ServiceMetrics.backfillWindows(.skipped).increment()
        logger.error("App Store notification backfill skipped a window it could not read; notifications in it are not backfilled", metadata: [
            "start": "\(RFC3339.format(stuck.start))", "end": "\(RFC3339.format(stuck.end))", "runs": "\(runs)", "error": "\(stuck.error)",
            "fix": "subsync reconcile --against-store --all asks the store about every purchase",
        ])
        try await checkpoints.failed(owner: owner, error: "skipped window \(window) after \(runs) runs: \(stuck.error)", now: clock.now())
    }

    /// Reads every page of `[start, end)` and hands each notification on; `false` when the lease
    /// was lost meanwhile.
    private func read(from start: Date, to end: Date, leaseFor: TimeInterval, outcome: inout Outcome) async throws -> Bool {
        var token: String?
        var pages = 0
        // Every token this window's walk was given: one seen before means the store leads in a
        // circle (A, B, A, ...), which would otherwise be followed to the page bound.
        var seen: Set<String> = []
        while true {
            guard pages < maximumPages else {
                throw AppStoreAPIError.malformedAnswer("more than \(maximumPages) pages of notification history in a day")
            }
            let page = try await api.notificationHistory(from: start, to: end, paginationToken: token)
            pages += 1
            outcome.pages += 1
            for item in page.notificationHistory {
                outcome.notifications += 1
                do {
                    let answer = try await notifications.handle(signedPayload: item.signedPayload, environment: api.configuration.storeEnvironment)
                    if answer.status == .applied { outcome.applied += 1 }
                } catch let error as APIError where error.status.code < 500 {
                    // A notification that does not verify or make a report changes nothing:
                    // said, and the run goes on.
                    outcome.refused += 1
                    logger.warning("backfilled App Store notification refused", metadata: ["code": "\(error.code)", "error": "\(error.message)"])
                }
            }
            guard page.hasMore else { return true }
            guard let next = page.paginationToken, seen.insert(next).inserted else {
                throw AppStoreAPIError.malformedAnswer("hasMore without a paginationToken new to this window")
            }
            token = next
            guard try await checkpoints.lease(owner: owner, now: clock.now(), duration: leaseFor) != nil else { return false }
        }
    }
}
