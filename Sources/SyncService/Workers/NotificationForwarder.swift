import Logging
import Postgres
import ServiceLifecycle

/// The process's one listening connection: LISTENs to every channel its parts wait on and
/// raises each channel's ``WakeSignal`` when a notification arrives on it.
///
/// One connection for all of them, not one per part: each is a PostgreSQL backend held for the
/// life of the process (`serve --workers 4` with four delivery loops would hold five). A lost
/// connection is opened again after a second;
/// the parts poll meanwhile, since notifications sent while it is down are lost.
public struct NotificationForwarder: Service {
    let configuration: ConnectionConfiguration
    /// The signal raised for each channel.
    let routes: [String: WakeSignal]
    let logger: Logger

    public init(configuration: ConnectionConfiguration, routes: [String: WakeSignal], logger: Logger) {
        self.configuration = configuration
        self.routes = routes
        self.logger = logger
    }

    public func run() async throws {
        // A service that returns ends the whole group: with nothing to listen for, it waits for
        // the shutdown like the others.
        guard !routes.isEmpty else {
            try? await gracefulShutdown()
            return
        }
        await cancelWhenGracefulShutdown {
            await WakeSignal.forwardNotifications(from: configuration, routes: routes, logger: logger)
        }
    }
}
