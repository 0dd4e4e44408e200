import Logging
import ServiceLifecycle
import SyncCore

/// Asks the App Store about expiries in a loop of its own (``AppStoreExpiryCheck/askDue()``), every
/// `interval` on the service's clock, so the expiry sweeper never waits on the network: the
/// sweeper only holds what is unanswered (docs/STORE.md, "Before an expiry").
public struct AppStoreExpiryQuestions: Service {
    let check: AppStoreExpiryCheck
    let interval: Duration
    let clock: any ServiceClock

    public init(check: AppStoreExpiryCheck, interval: Duration, clock: any ServiceClock) {
        self.check = check
        self.interval = interval
        self.clock = clock
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await check.askDue()
                try? await clock.sleep(for: interval)
            }
        }
    }
}
