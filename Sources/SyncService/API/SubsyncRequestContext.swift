import Hummingbird
import NIOCore
import Atomics

/// The request context of every route: Hummingbird's core context plus the peer's address,
/// which the unauthenticated App Store notification route rate-limits by, and the connection,
/// so that a refusal can stop reading a body it will not use (see ``Request/collectBody(upTo:context:)``).
public struct SubsyncRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The connected client (nil where there is no socket, as in router tests).
    public let remoteAddress: SocketAddress?
    /// The connection the request came on.
    let channel: any Channel
    /// Whether a handler has started reading the request body; shared by the copies of this
    /// context that the middleware chain passes along.
    let bodyReading = BodyReading()

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
        self.channel = source.channel
    }

    /// The client's IP address as text, for rate-limit keys: the TCP peer's, or behind a trusted
    /// proxy the one it forwards (``TrustedProxies``); `unknown` without a socket.
    func clientAddress(of request: Request, trusting proxies: TrustedProxies) -> String {
        proxies.clientAddress(peer: remoteAddress?.ipAddress, headers: request.headers)
    }

    /// Stops reading the connection: the answer being prepared is still written, then
    /// Hummingbird finds no next request and closes the connection.
    func closeAfterAnswer() {
        channel.close(mode: .input, promise: nil)
    }
}

/// Whether a handler has started reading a request's body (set once, read by ``ErrorMiddleware``
/// to decide whether a refusal must discard the body itself).
final class BodyReading: Sendable {
    private let started = ManagedAtomic(false)

    var hasStarted: Bool { started.load(ordering: .acquiring) }

    func start() { started.store(true, ordering: .releasing) }
}
