import Hummingbird
import Logging
import Postgres
import ServiceLifecycle

/// Builds the HTTP application with every route and the long-running services.
///
/// `subsync serve` calls this, and so do the tests (`app.test(.router)` / `.live`), so what is
/// tested is what runs.
public func buildApplication(
    configuration: ServiceConfiguration,
    pool: ConnectionPool,
    extraServices: [any Service] = [],
    logger: Logger
) -> some ApplicationProtocol {
    let router = Router()
    router.add(middleware: LogRequestsMiddleware(.debug))
    HealthController(pool: pool).addRoutes(to: router)

    return Application(
        router: router,
        configuration: .init(
            address: .hostname(configuration.host, port: configuration.port),
            serverName: "subsync"
        ),
        services: [DatabaseService(pool: pool, logger: logger)] + extraServices,
        logger: logger
    )
}
