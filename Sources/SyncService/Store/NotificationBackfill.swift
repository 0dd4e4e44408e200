import Foundation
import Logging
import ServiceLifecycle
import SyncCore
import SyncStore

/// Recovers App Store Server Notifications that never arrived (docs/STORE.md, "Backfill"): every
/// `interval` it asks Get Notification History from its checkpoint (less an overlap) to now and
/// hands each notification to the same code as `POST /v1/notifications/apple`, which applies it
/// once per `notificationUUID`, so the overlap and notifications that did arrive cost nothing.
///
/// One process of all `serve`s runs it at a time (a lease in `store_backfill`, renewed per page);
/// the checkpoint moves only after a complete run, so a process killed half-way leaves it where it
/// was and the next run asks again (what was applied is a duplicate then). A run never asks for
/// more than Apple keeps (180 days), and a first run looks back ``firstLookback``.
public struct NotificationBackfill: Service {
    let api: AppStoreServerAPI
    let notifications: NotificationController
    let checkpoints: StoreBackfillCheckpoint
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

    init(
        api: AppStoreServerAPI, notifications: NotificationController, checkpoints: StoreBackfillCheckpoint, interval: Duration,
        clock: any ServiceClock, logger: Logger, owner: String = UUID().uuidString
    ) {
        self.api = api
        self.notifications = notifications
        self.checkpoints = checkpoints
        self.interval = interval
        self.clock = clock
        self.logger = logger
        self.owner = owner
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
            // A day at a time, each checkpointed when read through: a long outage is caught up
            // piece by piece, and one piece that cannot be read does not hold the others back.
            while start < now {
                let end = min(start.addingTimeInterval(Self.window), now)
                guard try await read(from: start, to: end, leaseFor: leaseFor, outcome: &outcome) else {
                    logger.notice("App Store notification backfill: another process took the lease; stopping this run")
                    return outcome
                }
                outcome.completed = try await checkpoints.advance(owner: owner, to: end, notifications: outcome.notifications, now: clock.now())
                outcome.notifications = 0
                guard outcome.completed else { return outcome }
                start = end
            }
            if outcome.applied + outcome.refused > 0 {
                logger.notice("App Store notification backfill", metadata: [
                    "applied": "\(outcome.applied)", "refused": "\(outcome.refused)", "pages": "\(outcome.pages)",
                ])
            }
        } catch {
            logger.warning("App Store notification backfill failed; the checkpoint stays, the next run asks again", metadata: ["error": "\(error)"])
            try? await checkpoints.failed(owner: owner, error: "\(error)", now: clock.now())
        }
        return outcome
    }

    /// Reads every page of `[start, end)` and hands each notification on; `false` when the lease
    /// was lost meanwhile.
    private func read(from start: Date, to end: Date, leaseFor: TimeInterval, outcome: inout Outcome) async throws -> Bool {
        var token: String?
        var pages = 0
        while true {
            guard pages < Self.maximumPages else {
                throw AppStoreAPIError.malformedAnswer("more than \(Self.maximumPages) pages of notification history in a day")
            }
            let page = try await api.notificationHistory(from: start, to: end, paginationToken: token)
            pages += 1
            outcome.pages += 1
            for item in page.notificationHistory {
                outcome.notifications += 1
                do {
                    let answer = try await notifications.handle(signedPayload: item.signedPayload, environment: api.configuration.storeEnvironment)
                    if answer.status == "applied" { outcome.applied += 1 }
                } catch let error as APIError where error.status.code < 500 {
                    // A notification that does not verify or make a report changes nothing:
                    // said, and the run goes on.
                    outcome.refused += 1
                    logger.warning("backfilled App Store notification refused", metadata: ["code": "\(error.code)", "error": "\(error.message)"])
                }
            }
            guard page.hasMore else { return true }
            guard let next = page.paginationToken, next != token else {
                throw AppStoreAPIError.malformedAnswer("hasMore without a new paginationToken")
            }
            token = next
            guard try await checkpoints.lease(owner: owner, now: clock.now(), duration: leaseFor) != nil else { return false }
        }
    }
}
