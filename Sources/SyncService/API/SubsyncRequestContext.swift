import Hummingbird
import NIOCore

/// The request context of every route: Hummingbird's core context plus the peer's address,
/// which the unauthenticated App Store notification route rate-limits by.
public struct SubsyncRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The connected client (nil where there is no socket, as in router tests).
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
    }

    /// The client's IP address as text, for rate-limit keys; `unknown` without a socket.
    var clientAddress: String {
        remoteAddress?.ipAddress ?? "unknown"
    }
}
