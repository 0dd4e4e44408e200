import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ServiceLifecycle

/// Builds the HTTP application with every route and the long-running services (resolution
/// workers, expiry sweeper, metrics sampler, database pool).
///
/// `subsync serve` calls this, and so do the tests (`app.test(.router)` / `.live`), so what is
/// tested is what runs. With `configuration.workers == 0` no worker, sweeper or sampler starts.
/// - Throws: ``ConfigurationError`` when the settings and the dependencies do not fit together
///   (the rules `serve` checks before it reads a key: ``ServiceConfiguration/check(_:)``).
public func buildApplication(
    configuration: ServiceConfiguration,
    dependencies: ServiceDependencies,
    extraServices: [any Service] = [],
    logger: Logger
) throws -> some ApplicationProtocol {
    try configuration.check(dependencies.parts)
    // Device tokens are checked against their account's revocation (sql/0041).
    let parts = ApplicationParts(configuration: configuration, dependencies: dependencies.checkingTokenRevocations(), logger: logger)
    let shares = ConnectionShares(perSource: configuration.connectionsPerSource, proxies: configuration.trustedProxies)
    return Application(
        router: buildRouter(parts),
        server: .http1(configuration: .init(
            additionalChannelHandlers: [
                ConnectionShareHandler(shares: shares),
                RequestHeadTimeoutHandler(
                    headTimeout: TimeAmount(configuration.httpHeadTimeout), requestTimeout: TimeAmount(configuration.httpRequestTimeout))
            ],
            idleTimeout: TimeAmount(configuration.httpIdleTimeout))),
        configuration: .init(
            address: .hostname(configuration.host, port: configuration.port),
            serverName: "subsync",
            // Past this many open connections serve stops accepting until one closes (the
            // kernel's backlog holds the rest): descriptors stay bounded whatever clients do.
            availableConnectionsDelegate: MaximumAvailableConnections(configuration.maximumConnections)
        ),
        services: buildServices(parts) + extraServices,
        logger: logger
    )
}
