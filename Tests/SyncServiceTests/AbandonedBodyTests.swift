#if canImport(Glibc)
import Glibc
#endif
import Foundation
import TestSupport
import Testing

/// A `Connection: close` request answered before its body was read (413, 404, 401) left its
/// connection open for good in Hummingbird 2.28.1: the server waits for the client's end of the
/// stream but stops reading the unread body, so it never sees it. Found by `scripts/faults`
/// (the serve process grew about 9 MiB/s under such requests). `SUBSYNC_HTTP_IDLE_TIMEOUT_SECONDS`
/// closes them; this runs the real binary and counts its open file descriptors.
@Suite("Abandoned request bodies", .serialized)
struct AbandonedBodyTests {
    @Test("connections of Connection: close requests answered before their body was read are closed by the idle timeout")
    func abandonedBodiesAreClosed() async throws {
        let url = try #require(ProcessInfo.processInfo.environment["DATABASE_URL"], "run scripts/test")
        let port = freeTCPPort()
        let process = Process()
        process.executableURL = ServeCommandTests.binary
        process.arguments = ["serve", "--port", String(port), "--workers", "0", "--database-url", url]
        var environment = ProcessInfo.processInfo.environment
        environment["SUBSYNC_REQUIRE_SIGNED"] = "false"
        environment["SUBSYNC_DELIVERY_WORKERS"] = "0"
        environment["SUBSYNC_ADMIN_KEY"] = "abandoned-body-admin-key"
        // Long enough that a request the busy machine is slow to route is not closed before its answer
        // (the channel reads nothing while the handler waits); short enough to watch the closes.
        environment["SUBSYNC_HTTP_IDLE_TIMEOUT_SECONDS"] = "5"
        environment["SUBSYNC_LOG_LEVEL"] = "error"
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        #expect(await waitUntil { await httpStatus("http://127.0.0.1:\(port)/healthz") == 200 })
        let pid = process.processIdentifier
        let baseline = try openDescriptors(pid)

        let body = [UInt8](repeating: UInt8(ascii: "x"), count: 2 << 20)
        var answers: [String] = []
        for path in ["/v1/accounts/a1/sync", "/nope"] {
            for _ in 0..<10 {
                let head = "POST \(path) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer abandoned-body-admin-key\r\n"
                    + "Content-Type: application/json\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
                answers.append(try exchange(port: port, bytes: Array(head.utf8) + body))
            }
        }
        #expect(answers.filter { $0.hasPrefix("HTTP/1.1 413") }.count == 10, "\(Set(answers))")
        #expect(answers.filter { $0.hasPrefix("HTTP/1.1 404") }.count == 10, "\(Set(answers))")

        // Within a few idle timeouts every one of those connections is closed again.
        var open = try openDescriptors(pid)
        try await waitUntil {
            open = try openDescriptors(pid)
            return open <= baseline + 2
        }
        #expect(open <= baseline + 2, "\(open - baseline) connections still open (baseline \(baseline) descriptors)")
        #expect(process.isRunning)
    }

    func openDescriptors(_ pid: Int32) throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
    }

    /// Sends `bytes` on a new loopback connection, half-closes, and returns the first line of the answer.
    func exchange(port: Int, bytes: [UInt8]) throws -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EMFILE) }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
        // Sends and reads at once: the answer (given on the head) is read as soon as it comes, not
        // only after the whole body was pushed into the socket buffers; then the rest of the body is
        // sent as far as the server's buffers take it, and the write side is closed behind it.
        var sent = 0
        var answer: [UInt8] = []
        var reading = true
        var buffer = [UInt8](repeating: 0, count: 4096)
        while reading || sent < bytes.count {
            let events = (reading ? Int16(POLLIN) : 0) | (sent < bytes.count ? Int16(POLLOUT) : 0)
            var descriptor = pollfd(fd: fd, events: events, revents: 0)
            guard poll(&descriptor, 1, reading ? 30_000 : 2_000) > 0 else { break }
            if reading, descriptor.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count > 0 { answer += buffer[0..<count] }
                reading = count > 0 && answer.count < 64 && !answer.contains(13)
            } else if descriptor.revents & Int16(POLLOUT) != 0 {
                let chunk = min(bytes.count - sent, 65_536)
                let written = bytes[sent..<(sent + chunk)].withUnsafeBytes {
                    send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
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
