import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A request context that remembers the client's port, to tell connections apart.
struct PeerContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let remotePort: Int?

    init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remotePort = source.channel.remoteAddress?.port
    }
}

/// What the test server saw.
final class Recorder: Sendable {
    struct Seen: Sendable {
        var method: String
        var body: [UInt8]
        var headers: [String: String]
    }

    private let hits = NIOLockedValueBox<[String: Int]>([:])
    private let slowReleased = NIOLockedValueBox<Bool>(false)
    private let seen = NIOLockedValueBox<[Seen]>([])
    /// Requests being answered now, and the most there were at once.
    private let concurrency = NIOLockedValueBox<(now: Int, most: Int)>((0, 0))

    func enter() {
        concurrency.withLockedValue { $0.now += 1; $0.most = max($0.most, $0.now) }
    }

    func leave() {
        concurrency.withLockedValue { $0.now -= 1 }
    }

    /// The most requests `/slow` answered at once.
    var mostAtOnce: Int {
        concurrency.withLockedValue { $0.most }
    }

    /// Makes every `/slow` request, answering now or later, answer at once: a long one that has
    /// done its job (held a slot) ends without its full wait, and so does one its client gave
    /// up on, which the server's graceful shutdown would otherwise wait for.
    func releaseSlow() {
        slowReleased.withLockedValue { $0 = true }
    }

    var isSlowReleased: Bool {
        slowReleased.withLockedValue { $0 }
    }

    func hit(_ path: String) {
        hits.withLockedValue { $0[path, default: 0] += 1 }
    }

    func hits(_ path: String) -> Int {
        hits.withLockedValue { $0[path, default: 0] }
    }

    /// Returns once `path` was requested (or after 300 s, for the caller's expectations to fail).
    func waitForHit(_ path: String) async throws {
        let deadline = ContinuousClock.now + .seconds(300)
        while hits(path) == 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    func record(_ request: Seen) {
        seen.withLockedValue { $0.append(request) }
    }

    var requests: [Seen] {
        seen.withLockedValue { $0 }
    }
}

/// A real HTTP/1.1 server on 127.0.0.1 with an ephemeral port, for the duration of `body`.
enum TestServer {
    static let hugeBodySize = 5_000_000

    static func run<T: Sendable>(_ body: @Sendable (_ port: Int, _ recorder: Recorder) async throws -> T) async throws -> T {
        let recorder = Recorder()
        let router = Router(context: PeerContext.self)

        let echo: @Sendable (Request, PeerContext) async throws -> Response = { request, _ in
            recorder.hit("echo")
            let buffer = try await request.body.collect(upTo: 16 << 20)
            let bytes = Array(buffer.readableBytesView)
            var headers: [String: String] = [:]
            for field in request.headers {
                headers[field.name.canonicalName] = field.value
            }
            recorder.record(.init(method: request.method.rawValue, body: bytes, headers: headers))
            var responseHeaders = HTTPFields()
            if let custom = headers["x-custom"], let name = HTTPField.Name("X-Seen-Custom") {
                responseHeaders[name] = custom
            }
            return Response(status: .ok, headers: responseHeaders, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
        }
        router.post("echo", use: echo)
        router.put("echo", use: echo)
        router.get("echo", use: echo)

        router.get("ok") { _, _ in
            recorder.hit("ok")
            return "ok"
        }
        router.get("status/500") { _, _ in
            Response(status: .internalServerError, body: .init(byteBuffer: ByteBuffer(string: "boom")))
        }
        router.get("slow") { request, _ -> String in
            recorder.hit("slow")
            recorder.enter()
            defer { recorder.leave() }
            let milliseconds = request.uri.queryParameters.get("ms", as: Int.self) ?? 1000
            // In short steps, so that `releaseSlow()` ends the wait.
            let end = ContinuousClock.now + .milliseconds(milliseconds)
            while ContinuousClock.now < end, !recorder.isSlowReleased {
                try await Task.sleep(for: .milliseconds(20))
            }
            return "slow"
        }
        router.get("redirect") { _, _ in
            recorder.hit("redirect")
            return Response(status: .found, headers: [.location: "/target"])
        }
        router.get("target") { _, _ in
            recorder.hit("target")
            return "target"
        }
        router.get("huge") { _, _ in
            Response(
                status: .ok,
                body: .init(byteBuffer: ByteBuffer(repeating: UInt8(ascii: "x"), count: hugeBodySize)))
        }
        router.get("port") { _, context in
            "\(context.remotePort ?? -1)"
        }

        var logger = Logger(label: "curl-tests.server")
        logger.logLevel = .critical
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: router,
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                portContinuation.yield(channel.localAddress?.port ?? -1)
                portContinuation.finish()
            },
            logger: logger
        )
        // Stopped by a graceful shutdown, never by cancelling its task: cancelling while a
        // connection is accepted but not yet served drops that connection's NIOAsyncChannel
        // unfinished, and NIO traps ("Deinited NIOAsyncWriter without calling finish()",
        // apple/swift-nio#2637; seen once under scripts/test --stress).
        let services = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [], logger: logger))
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await services.run() }
            let result: Result<T, any Error>
            var iterator = ports.makeAsyncIterator()
            if let port = await iterator.next(), port > 0 {
                do { result = .success(try await body(port, recorder)) } catch { result = .failure(error) }
            } else {
                result = .failure(TestServerError.didNotStart)
            }
            // The graceful shutdown waits for every handler, also those of abandoned requests.
            recorder.releaseSlow()
            await services.triggerGracefulShutdown()
            try await group.waitForAll()
            return try result.get()
        }
    }

    /// A loopback port with nothing listening on it: bound to find a free one, then closed.
    static func closedPort() throws -> Int {
        #if canImport(Glibc)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw TestServerError.noFreePort }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let port = withUnsafeMutablePointer(to: &address) { pointer -> Int in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                guard bind(descriptor, generic, length) == 0, getsockname(descriptor, generic, &length) == 0 else {
                    return -1
                }
                return Int(UInt16(bigEndian: pointer.pointee.sin_port))
            }
        }
        guard port > 0 else { throw TestServerError.noFreePort }
        return port
    }
}

enum TestServerError: Error {
    case didNotStart
    case noFreePort
}
