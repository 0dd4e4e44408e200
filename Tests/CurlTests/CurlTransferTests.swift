import Testing

@testable import Curl

/// The callbacks' parsing, fed directly (a real server cannot easily send 1xx responses or folded headers).
@Suite("CurlTransfer callbacks")
struct CurlTransferTests {
    private func transfer(maximumResponseBytes: Int = 65_536) -> CurlTransfer {
        CurlTransfer(
            request: CurlRequest(url: "http://example.com/", maximumResponseBytes: maximumResponseBytes),
            addressGuard: .publicOnly, userAgent: "test")
    }

    private func feed(_ transfer: CurlTransfer, _ lines: [String]) {
        for line in lines {
            Array(line.utf8).withUnsafeBytes { transfer.receiveHeaderLine($0) }
        }
    }

    @Test("only the final response's headers are kept; names lowercased; values trimmed")
    func headers() {
        let transfer = transfer()
        feed(transfer, [
            "HTTP/1.1 100 Continue\r\n", "X-Interim: 1\r\n", "\r\n",
            "HTTP/1.1 200 OK\r\n", "Content-Type:  application/json \r\n", "X-Empty:\r\n",
            "X-Folded: first\r\n", " \tsecond\r\n", "not a header line\r\n", ": no name\r\n",
            "Retry-After: 120\r\n", "\r\n",
        ])
        #expect(transfer.responseHeaders.map(\.name) == ["content-type", "x-empty", "x-folded", "retry-after"])
        #expect(transfer.responseHeaders.map(\.value) == ["application/json", "", "first second", "120"])
        let response = CurlResponse(status: 200, headers: transfer.responseHeaders)
        #expect(response.header("Retry-After") == "120")
        #expect(response.header("x-interim") == nil)
        #expect(response.header("missing") == nil)
    }

    @Test("a response from the loop reads its headers from the block as collected; assigning replaces them")
    func responseFromBlock() {
        let lines = [
            "HTTP/1.1 503 Service Unavailable\r\n", "Retry-After:  30 \r\n", "X-Folded: a\r\n", "\tb\r\n",
            "X-Empty:\r\n", "\r\n",
        ]
        var block = CurlHeaderBlock(limit: 1_000)
        for line in lines {
            Array(line.utf8).withUnsafeBytes { block.receive($0) }
        }
        var response = CurlResponse(status: 503, headerBlock: block, body: [], truncated: false, totalTime: .zero)
        #expect(response.headers.map(\.name) == ["retry-after", "x-folded", "x-empty"])
        #expect(response.headers.map(\.value) == ["30", "a b", ""])
        #expect(response.header("RETRY-AFTER") == "30")
        response.headers = [(name: "x-other", value: "1")]
        #expect(response.header("retry-after") == nil)
        #expect(response.header("x-other") == "1")
        // The same lines through a transfer's callback give the same fields.
        let transfer = transfer()
        feed(transfer, lines)
        #expect(transfer.responseHeaders.map(\.name) == ["retry-after", "x-folded", "x-empty"])
        #expect(transfer.responseHeaders.map(\.value) == ["30", "a b", ""])
    }

    @Test("collected header bytes are bounded")
    func headerCap() {
        let transfer = transfer()
        let line = "X-Big: " + String(repeating: "a", count: 10_000) + "\r\n"
        feed(transfer, ["HTTP/1.1 200 OK\r\n"] + Array(repeating: line, count: 100))
        let total = transfer.responseHeaders.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count }
        #expect(total <= CurlTransfer.maximumHeaderBytes)
        #expect(transfer.responseHeaders.count == CurlTransfer.maximumHeaderBytes / 10_007)  // "X-Big: " + 10 000 bytes
    }

    @Test("the body is capped across many writes")
    func bodyCap() {
        let transfer = transfer(maximumResponseBytes: 5)
        for chunk in ["ab", "cd", "ef", "gh"] {
            Array(chunk.utf8).withUnsafeBytes { transfer.receiveBody($0) }
        }
        #expect(transfer.responseBody == Array("abcde".utf8))
        #expect(transfer.truncated)
    }

    @Test("timeouts convert to libcurl milliseconds, never 0")
    func durations() {
        #expect(Duration.seconds(5).curlMilliseconds == 5000)
        #expect(Duration.milliseconds(1500).curlMilliseconds == 1500)
        #expect(Duration.microseconds(10).curlMilliseconds == 1)
        #expect(Duration.zero.curlMilliseconds == 1)
        #expect(Duration.seconds(-3).curlMilliseconds == 1)
        #expect(Duration.seconds(Int64.max).curlMilliseconds == Int(Int32.max))
    }

    @Test("waiting transfers: per-host limit, hosts in turn, a slot freed starts the next of that host")
    func waitingTransfers() {
        func make(_ url: String) -> CurlTransfer {
            CurlTransfer(request: CurlRequest(url: url), addressGuard: .publicOnly, userAgent: "test")
        }
        var waiting = CurlWaitingTransfers(perHostLimit: 2)
        let a = (1...3).map { make("https://A.example/hook/\($0)") }
        let b = make("https://b.example:8443/x?y=1")
        for transfer in a + [b] { waiting.append(transfer) }
        #expect(waiting.next() === a[0])
        #expect(waiting.next() === b, "hosts take turns")
        #expect(waiting.next() === a[1])
        #expect(waiting.next() == nil, "a.example has its two")
        #expect(!waiting.hasStartable)
        waiting.finished(b)
        #expect(waiting.next() == nil, "a free slot of another host starts nothing here")
        waiting.finished(a[0])
        #expect(waiting.hasStartable)
        #expect(waiting.next() === a[2])
        #expect(waiting.next() == nil)
        for transfer in [a[1], a[2]] { waiting.finished(transfer) }
        #expect(waiting.removeAll().isEmpty)

        var unlimited = CurlWaitingTransfers(perHostLimit: 0)
        for transfer in a { unlimited.append(transfer) }
        #expect([unlimited.next(), unlimited.next(), unlimited.next()].compactMap { $0 }.count == 3)
    }

    @Test("host keys: scheme, host and port, lowercased, without user information, path or the default port")
    func hostKeys() {
        #expect(CurlTransfer.hostKey(of: "https://Hooks.Example.com/a/b?c#d") == "https://hooks.example.com")
        #expect(CurlTransfer.hostKey(of: "http://user:pw@127.0.0.1:8080/x") == "http://127.0.0.1:8080")
        #expect(CurlTransfer.hostKey(of: "http://[::1]:9/x") == "http://[::1]:9")
        #expect(CurlTransfer.hostKey(of: "http://a.example?q") == "http://a.example")
        #expect(CurlTransfer.hostKey(of: "https://a.example") != CurlTransfer.hostKey(of: "http://a.example"))
        // The scheme's default port (or an empty one) is the same host; another port is not.
        #expect(CurlTransfer.hostKey(of: "https://a.example:443/x") == "https://a.example")
        #expect(CurlTransfer.hostKey(of: "HTTP://A.example:80") == "http://a.example")
        #expect(CurlTransfer.hostKey(of: "https://a.example:/x") == "https://a.example")
        #expect(CurlTransfer.hostKey(of: "https://[::1]:443/x") == "https://[::1]")
        #expect(CurlTransfer.hostKey(of: "http://a.example:443") == "http://a.example:443")
        #expect(CurlTransfer.hostKey(of: "https://a.example:8443") == "https://a.example:8443")
        #expect(CurlTransfer.hostKey(of: "https://[::443]/x") == "https://[::443]")
    }
}
