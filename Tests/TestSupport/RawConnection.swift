#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// One blocking loopback TCP connection, with 300 s timeouts on every read and write (a busy
/// core can keep an answer longer than seconds; the serve's idle timeout, 3600 s, is longer still).
public final class RawConnection {
    public struct Response: CustomStringConvertible {
        public var status: Int
        public var headers: [String: String]
        public var body: String
        public var description: String { "\(status) \(headers) \(body)" }
    }

    public let fd: Int32
    private var pending: [UInt8] = []

    public init(port: Int) throws {
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
    public func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let written = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EPIPE) }
            sent += written
        }
    }

    /// Reads one response: its head, and a body of its Content-Length.
    public func readResponse() throws -> Response {
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
    public func exchange(_ bytes: [UInt8]) throws -> String {
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
