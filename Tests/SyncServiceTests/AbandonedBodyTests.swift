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

    @Test("connections of Connection: close requests answered before their body was read are closed without the idle timeout")
    func abandonedBodiesAreClosed() async throws {
        let serve = try await ServeProcess.onTestDatabase(environment: ServeProcess.apiOnly)
        defer { serve.terminate() }
        let baseline = try serve.openDescriptors()

        let body = [UInt8](repeating: UInt8(ascii: "x"), count: 2 << 20)
        var answers: [String] = []
        for (path, key) in [("/v1/accounts/a1/sync", ServeProcess.adminKey), ("/nope", ServeProcess.adminKey), ("/v1/accounts/a1/sync", "wrong-key")] {
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
        let serve = try await ServeProcess.onTestDatabase(environment: ServeProcess.apiOnly)
        defer { serve.terminate() }
        let connection = try RawConnection(port: serve.port)
        let size = 3 << 20
        let head = "POST /v1/accounts/a1/sync HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(ServeProcess.adminKey)\r\n"
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
        let serve = try await ServeProcess.onTestDatabase(environment: ServeProcess.apiOnly)
        defer { serve.terminate() }
        let connection = try RawConnection(port: serve.port)
        let head = "POST /v1/accounts/a1/sync HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(ServeProcess.adminKey)\r\n"
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
        let serve = try await ServeProcess.onTestDatabase(environment: ServeProcess.apiOnly)
        defer { serve.terminate() }
        let connection = try RawConnection(port: serve.port)
        let declared = 1 << 30
        let head = "POST /v1/accounts/a1/sync HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(ServeProcess.adminKey)\r\n"
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

