import NIOCore
import NIOHTTPTypes

/// Bounds how long a connection may take over each request (docs/SECURITY.md, *Requests and
/// connections*), where
/// Hummingbird's idle timeout starts again on every part and stops while a response is under
/// way:
/// - **waiting for a head**: the next request head must be complete `headTimeout` after the
///   connection opened or the previous response ended (an idle keep-alive connection is closed
///   then too);
/// - **in a request**: from its head, the request must be read (body included, also a refused
///   one that the service drains) and its response written in full within `requestTimeout`,
///   so a client that trickles its body or stops reading the answer cannot hold its
///   connection, and with it one of the `SUBSYNC_HTTP_MAX_CONNECTIONS` slots.
/// Pipelined requests run one after another, each with its own `requestTimeout`.
///
/// One per connection (the pipeline's `additionalChannelHandlers` makes a new one each time),
/// used only on its channel's event loop.
final class RequestHeadTimeoutHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    let headTimeout: TimeAmount
    let requestTimeout: TimeAmount
    private var deadline: Scheduled<Void>?
    /// Heads read whose responses have not ended.
    private var unanswered = 0

    init(headTimeout: TimeAmount, requestTimeout: TimeAmount) {
        self.headTimeout = headTimeout
        self.requestTimeout = requestTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context, headTimeout) }
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context, headTimeout)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head = unwrapInboundIn(data) {
            unanswered += 1
            // The first request of a pipelined run starts its clock; the others wait their turn.
            if unanswered == 1 { arm(context, requestTimeout) }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data), unanswered > 0 {
            unanswered -= 1
            arm(context, unanswered == 0 ? headTimeout : requestTimeout)
        }
        context.write(data, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        disarm()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        disarm()
    }

    private func arm(_ context: ChannelHandlerContext, _ timeout: TimeAmount) {
        disarm()
        deadline = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) {
            context.close(promise: nil)
        }
    }

    private func disarm() {
        deadline?.cancel()
        deadline = nil
    }
}
