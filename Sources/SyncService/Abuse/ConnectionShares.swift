import Curl
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTPTypes

/// Each source's share of serve's open connections (docs/SECURITY.md, "One host cannot take
/// every connection"): a source (an IPv4 address, an IPv6 /64, the keys of ``TrustedProxies``)
/// holds at most ``perSource`` connections at once; a connection past that is closed as soon as
/// it opens, before anything of it is read. So a host that holds sockets open (trickling heads,
/// or a probe every few seconds on each) takes at most its share of
/// `SUBSYNC_HTTP_MAX_CONNECTIONS`, never all of it.
///
/// A trusted proxy's own connections are counted apart, under no share: every client behind it
/// arrives from its address, so a share would let one client behind it lock out the rest. The
/// proxy bounds its clients' connections itself, and the global bound still holds.
final class ConnectionShares: Sendable {
    /// The most connections one source may hold at once.
    let perSource: Int
    let proxies: TrustedProxies
    private let open = NIOLockedValueBox<[String: Int]>([:])

    init(perSource: Int, proxies: TrustedProxies) {
        self.perSource = max(1, perSource)
        self.proxies = proxies
    }

    /// The key a peer's connections count under; `nil` for a trusted proxy and for a peer
    /// without an IP address (a UNIX socket), which take no share.
    func key(of peer: SocketAddress?) -> String? {
        guard let text = peer?.ipAddress, let address = IPAddress(text) else { return nil }
        if proxies.trusts(address) { return nil }
        return TrustedProxies.key(address)
    }

    /// Takes a slot of `key`'s share; `false` (nothing taken) when its share is full.
    func admit(_ key: String) -> Bool {
        open.withLockedValue { open in
            let held = open[key, default: 0]
            guard held < perSource else { return false }
            open[key] = held + 1
            return true
        }
    }

    /// Gives back a slot ``admit(_:)`` took.
    func release(_ key: String) {
        open.withLockedValue { open in
            let held = open[key, default: 0] - 1
            open[key] = held > 0 ? held : nil
        }
    }

    /// Connections held by `key` now.
    func held(by key: String) -> Int {
        open.withLockedValue { $0[key, default: 0] }
    }
}

/// Takes a slot of its source's share when the connection becomes active and gives it back when
/// the connection ends, or closes the connection at once when the share is full
/// (``ConnectionShares``).
///
/// One per connection (the pipeline's `additionalChannelHandlers` makes a new one each time),
/// used only on its channel's event loop.
final class ConnectionShareHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    let shares: ConnectionShares
    /// The key whose slot this connection holds, from admission until it is given back.
    private var holding: String?
    private var decided = false

    init(shares: ConnectionShares) {
        self.shares = shares
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { decide(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        decide(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        giveBack()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        giveBack()
    }

    private func decide(_ context: ChannelHandlerContext) {
        guard !decided else { return }
        decided = true
        guard let key = shares.key(of: context.channel.remoteAddress) else { return }
        if shares.admit(key) {
            holding = key
        } else {
            context.close(promise: nil)
        }
    }

    private func giveBack() {
        if let key = holding { shares.release(key) }
        holding = nil
    }
}
