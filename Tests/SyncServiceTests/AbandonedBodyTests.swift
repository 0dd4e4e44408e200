#if canImport(Glibc)
import Glibc
#endif
import Foundation
import TestSupport
import Testing

/// Request bodies the service refuses (over a route's limit, or answered on the head: 401, 404,
/// 429) against the real binary, over raw loopback sockets so the tests control exactly what is
/// sent and when.
///
/// History: a `Connection: close` request answered before its body was read left its connection
/// open for good in Hummingbird 2.28.1 (the server waits for the client's end of stream but stops
/// reading the unread body, so it never sees it; `scripts/faults` found the process growing about
/// 9 MiB/s). The HTTP idle timeout bounded that; now the refusal reads and throws the body away
/// itself (see `RequestBodies`), so these tests run with an idle timeout far longer than their
/// deadlines: anything they see closed was closed by the service's own handling.
@Suite("Refused request bodies", .serialized)
struct AbandonedBodyTests {
    static let adminKey = "abandoned-body-admin-key"

    @Test("connections of Connection: close requests answered before their body was read are closed without the idle timeout")
    func abandonedBodiesAreClosed() async throws {
        let serve = try await ServeProcess()
        defer { serve.stop() }
        let baseline = try serve.openDescriptors()

        let body = [UInt8](repeating: UInt8(ascii: "x"), count: 2 << 20)
        var answers: [String] = []
        for (path, key) in [("/v1/accounts/a1/sync", Self.adminKey), ("/nope", Self.adminKey), ("/v1/accounts/a1/sync", "wrong-key")] {
            for _ in 0..<10 {
                let head = "POST \(path) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(key)\r\n"
                    + "Content-Type: application/json\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
                answers.append(try RawConnection(port: serve.port).exchange(Array(head.utf8) + body))
            }
        }
        #expect(answers.filter { $0.hasPrefix("HTTP/1.1 413") }.count == 10, "\(Set(answers))")
        #expect(answers.filter { $0.hasPrefix("HTTP/1.1 404") }.count == 10, "\(Set(answers))")
        #expect(answers.filter { $0.hasPrefix("HTTP/1.1 401") }.count == 10, "\(Set(answers))")

        // Long before the (3600 s) idle timeout, every one of those connections is closed again.
        var open = try serve.openDescriptors()
        try await waitUntil {
            open = try serve.openDescriptors()
            return open <= baseline + 2
        }
        #expect(open <= baseline + 2, "\(open - baseline) connections still open (baseline \(baseline) descriptors)")
        #expect(serve.isRunning)
    }

    @Test("an oversized body is refused on its head, and the connection serves the next request once the body is sent")
    func refusedOnTheHead() async throws {
        let serve = try await ServeProcess()
        defer { serve.stop() }
        let connection = try RawConnection(port: serve.port)
        let size = 3 << 20
        let head = "POST /v1/accounts/a1/sync HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(Self.adminKey)\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(size)\r\n\r\n"
        try connection.send(Array(head.utf8))
        // Not one byte of the body is sent, yet the answer comes: nothing was waited for or buffered.
        let refusal = try connection.readResponse()
        #expect(refusal.status == 413, "\(refusal)")
        #expect(refusal.body.contains("\"body_too_large\""), "\(refusal)")
        #expect(refusal.headers["connection"] != "close", "\(refusal)")

        // The client sends the body anyway (as clients that do not read while sending do); the
        // service throws it away and the same connection answers the next request.
        try connection.send([UInt8](repeating: UInt8(ascii: "x"), count: size))
        try connection.send(Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        let next = try connection.readResponse()
        #expect(next.status == 200, "\(next)")
        #expect(serve.isRunning)
    }

    @Test("a chunked body over the limit is refused after its end, without breaking the connection")
    func chunkedOverTheLimit() async throws {
        let serve = try await ServeProcess()
        defer { serve.stop() }
        let connection = try RawConnection(port: serve.port)
        let head = "POST /v1/accounts/a1/sync HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(Self.adminKey)\r\n"
            + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        var bytes = Array(head.utf8)
        let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 64 << 10)
        for _ in 0..<40 {  // 2.5 MiB, over the 1 MiB limit
            bytes += Array("\(String(chunk.count, radix: 16))\r\n".utf8) + chunk + Array("\r\n".utf8)
        }
        bytes += Array("0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        try connection.send(bytes)
        let refusal = try connection.readResponse()
        #expect(refusal.status == 413, "\(refusal)")
        #expect(refusal.body.contains("\"body_too_large\""), "\(refusal)")
        let next = try connection.readResponse()
        #expect(next.status == 200, "\(next)")
    }

    @Test("a body past the discard limit is not read without end: the connection is closed after the 413")
    func endlessBodyIsCutOff() async throws {
        let serve = try await ServeProcess()
        defer { serve.stop() }
        let connection = try RawConnection(port: serve.port)
        let declared = 1 << 30
        let head = "POST /v1/accounts/a1/sync HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(Self.adminKey)\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(declared)\r\n\r\n"
        try connection.send(Array(head.utf8))
        let refusal = try connection.readResponse()
        #expect(refusal.status == 413, "\(refusal)")
        #expect(refusal.headers["connection"] == "close", "\(refusal)")

        // Keep sending: the service reads at most its discard limit (8 MiB), then stops reading and
        // closes, so the client's writes fail long before the declared gigabyte.
        let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 64 << 10)
        var sent = 0
        while sent < declared {
            guard (try? connection.send(chunk)) != nil else { break }
            sent += chunk.count
        }
        #expect(sent < 64 << 20, "the service took \(sent >> 20) MiB of a refused body")
        #expect(serve.isRunning)
    }
}

/// A `subsync serve` on a free port, with the HTTP idle timeout far longer than any test here.
struct ServeProcess {
    let port = freeTCPPort()
    private let process = Process()

    /// `workers`: resolution workers of its own (none by default: the API only).
    init(workers: Int = 0) async throws {
        let url = try TestDatabase.url()
        process.executableURL = TestPackage.subsyncBinary
        process.arguments = ["serve", "--port", String(port), "--workers", String(workers), "--database-url", url]
        var environment = ProcessInfo.processInfo.environment
        environment["SUBSYNC_REQUIRE_SIGNED"] = "false"
        environment["SUBSYNC_DELIVERY_WORKERS"] = "0"
        environment["SUBSYNC_ADMIN_KEY"] = AbandonedBodyTests.adminKey
        environment["SUBSYNC_HTTP_IDLE_TIMEOUT_SECONDS"] = "3600"
        // PostgreSQL on a busy core can be silent longer than serve's 15 s default.
        environment["SUBSYNC_DB_ANSWER_TIMEOUT_SECONDS"] = "600"
        environment["SUBSYNC_LOG_LEVEL"] = "error"
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let port = port
        // Polled with Task.sleep (in waitUntil), not usleep: this runs on the cooperative pool.
        if await waitUntil(seconds: 600, { (try? RawConnection(port: port)) != nil }) { return }
        stop()
        throw POSIXError(.ECONNREFUSED)
    }

    var isRunning: Bool { process.isRunning }

    func openDescriptors() throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/\(process.processIdentifier)/fd").count
    }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }
}

/// One blocking loopback TCP connection, with 300 s timeouts on every read and write (a busy
/// core can keep an answer longer than seconds; the serve's idle timeout, 3600 s, is longer still).
final class RawConnection {
    struct Response: CustomStringConvertible {
        var status: Int
        var headers: [String: String]
        var body: String
        var description: String { "\(status) \(headers) \(body)" }
    }

    let fd: Int32
    private var pending: [UInt8] = []

    init(port: Int) throws {
        // `fd` is set only once the connection is made: a failed init then never runs `deinit`,
        // so the descriptor is closed exactly once. (Closing it here *and* in `deinit` closed
        // whatever descriptor the process had reused the number for, libpq's sockets included:
        // "lost synchronization with server: got message type "H"" under --stress.)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
        var timeout = timeval(tv_sec: 300, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(descriptor)
            throw POSIXError(.ECONNREFUSED)
        }
        fd = descriptor
    }

    deinit { close(fd) }

    /// Sends all of `bytes`; throws when the peer stopped taking them (closed, reset, or 300 s stalled).
    func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let written = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EPIPE) }
            sent += written
        }
    }

    /// Reads one response: its head, and a body of its Content-Length.
    func readResponse() throws -> Response {
        func fill() throws {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { throw POSIXError(count == 0 ? .ECONNRESET : POSIXErrorCode(rawValue: errno) ?? .EIO) }
            pending += buffer[0..<count]
        }
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        var end: Int?
        while end == nil {
            end = pending.indices.dropLast(3).first { Array(pending[$0..<($0 + 4)]) == separator }
            if end == nil { try fill() }
        }
        let headEnd = end ?? 0
        let lines = String(decoding: pending[0..<headEnd], as: UTF8.self).components(separatedBy: "\r\n")
        let status = lines.first.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let length = headers["content-length"].flatMap { Int($0) } ?? 0
        while pending.count < headEnd + 4 + length { try fill() }
        let body = String(decoding: pending[(headEnd + 4)..<(headEnd + 4 + length)], as: UTF8.self)
        pending.removeFirst(headEnd + 4 + length)
        return Response(status: status, headers: headers, body: body)
    }

    /// Sends `bytes` and reads at once (the answer may come on the head, before the body is
    /// taken), half-closes, and returns the first line of the answer.
    func exchange(_ bytes: [UInt8]) throws -> String {
        var sent = 0
        var answer: [UInt8] = []
        var reading = true
        var buffer = [UInt8](repeating: 0, count: 4096)
        while reading || sent < bytes.count {
            let events = (reading ? Int16(POLLIN) : 0) | (sent < bytes.count ? Int16(POLLOUT) : 0)
            var descriptor = pollfd(fd: fd, events: events, revents: 0)
            guard poll(&descriptor, 1, reading ? 300_000 : 2_000) > 0 else { break }
            if reading, descriptor.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count > 0 { answer += buffer[0..<count] }
                reading = count > 0 && answer.count < 64 && !answer.contains(13)
            } else if descriptor.revents & Int16(POLLOUT) != 0 {
                let chunk = min(bytes.count - sent, 65_536)
                let written = bytes[sent..<(sent + chunk)].withUnsafeBytes {
                    Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
                }
                if written > 0 { sent += written } else if errno != EAGAIN, errno != EWOULDBLOCK { sent = bytes.count }
            } else {
                break
            }
        }
        shutdown(fd, Int32(SHUT_WR))
        return String(decoding: answer.prefix(while: { $0 != 13 }), as: UTF8.self)
    }
}
