import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import SyncService
import Testing
import TestSupport

/// `SUBSYNC_TRUSTED_PROXIES` (docs/SECURITY.md): the limits by source address behind a reverse
/// proxy, written as a client behind it (and one beside it) would send.
@Suite("Trusted proxies: the client address behind a reverse proxy")
struct TrustedProxiesTests {
    static func headers(_ fields: [(String, String)]) -> HTTPFields {
        var headers = HTTPFields()
        for (name, value) in fields {
            if let name = HTTPField.Name(name) { headers.append(HTTPField(name: name, value: value)) }
        }
        return headers
    }

    @Test("the client is the right-most hop that is not a trusted proxy, of the one header the proxies write, and only when the peer is trusted", arguments: [
        // (peer, header, headers, expected key)
        ("10.0.0.2", "x-forwarded-for", [("X-Forwarded-For", "203.0.113.5")], "203.0.113.5"),
        // What a client writes itself stands left of what the proxy appended.
        ("10.0.0.2", "x-forwarded-for", [("X-Forwarded-For", "198.51.100.1, 203.0.113.5")], "203.0.113.5"),
        // Two trusted proxies in a row.
        ("10.0.0.2", "x-forwarded-for", [("X-Forwarded-For", "198.51.100.1, 203.0.113.5, 10.0.0.9")], "203.0.113.5"),
        // Two header lines are one list.
        ("10.0.0.2", "x-forwarded-for", [("X-Forwarded-For", "198.51.100.1"), ("X-Forwarded-For", "203.0.113.6")], "203.0.113.6"),
        // RFC 7239, with quotes, brackets and ports; an IPv6 client is keyed by its /64.
        ("10.0.0.2", "forwarded", [("Forwarded", #"for=198.51.100.1;proto=https, for="[2001:db8::7]:4711""#)], "2001:db8::/64"),
        ("10.0.0.2", "forwarded", [("Forwarded", "for=203.0.113.8:443")], "203.0.113.8"),
        // Only the header the proxies write counts: behind a Forwarded proxy, a client's own
        // X-Forwarded-For is ignored, and the other way round.
        ("10.0.0.2", "forwarded", [("X-Forwarded-For", "192.0.2.99"), ("Forwarded", "for=198.51.100.1")], "198.51.100.1"),
        ("10.0.0.2", "x-forwarded-for", [("X-Forwarded-For", "203.0.113.5"), ("Forwarded", "for=192.0.2.99")], "203.0.113.5"),
        ("10.0.0.2", "forwarded", [("X-Forwarded-For", "192.0.2.99")], "10.0.0.2"),
        // A peer that is not trusted: its headers count for nothing.
        ("192.0.2.77", "x-forwarded-for", [("X-Forwarded-For", "203.0.113.5")], "192.0.2.77"),
        // Garbage where the proxy's hop should be: never a key of its own.
        ("10.0.0.2", "x-forwarded-for", [("X-Forwarded-For", "198.51.100.1, not-an-address")], "10.0.0.2"),
        ("10.0.0.2", "x-forwarded-for", [("X-Forwarded-For", "unknown")], "10.0.0.2"),
        ("10.0.0.2", "forwarded", [("Forwarded", "for=_hidden")], "10.0.0.2"),
        // No header: the proxy itself.
        ("10.0.0.2", "x-forwarded-for", [], "10.0.0.2"),
        // Every hop a proxy: the left-most.
        ("10.0.0.2", "x-forwarded-for", [("X-Forwarded-For", "10.0.0.7, 10.0.0.8")], "10.0.0.7"),
        // An IPv4-mapped IPv6 peer is its IPv4 address.
        ("::ffff:10.0.0.2", "x-forwarded-for", [("X-Forwarded-For", "203.0.113.9")], "203.0.113.9"),
        // IPv6 clients of one /64 share a key.
        ("10.0.0.2", "x-forwarded-for", [("X-Forwarded-For", "2001:db8:1:2:aaaa::1")], "2001:db8:1:2::/64"),
        ("10.0.0.2", "x-forwarded-for", [("X-Forwarded-For", "2001:db8:1:2:bbbb::9")], "2001:db8:1:2::/64"),
    ])
    func clientAddress(peer: String, header: String, fields: [(String, String)], expected: String) throws {
        let proxies = try TrustedProxies(list: "10.0.0.0/8", header: try #require(TrustedProxies.Header(rawValue: header)))
        #expect(proxies.clientAddress(peer: peer, headers: Self.headers(fields)) == expected)
        // Without the setting the peer is the client, whatever the headers say.
        let peerKey = peer == "::ffff:10.0.0.2" ? "10.0.0.2" : peer
        #expect(TrustedProxies.none.clientAddress(peer: peer, headers: Self.headers(fields)) == peerKey)
    }

    @Test("untrusted IPv6 peers are keyed by their /64")
    func ipv6PeerKey() {
        #expect(TrustedProxies.none.clientAddress(peer: "2001:db8:5:6:1::2", headers: [:]) == "2001:db8:5:6::/64")
    }

    @Test("the setting refuses what is not a CIDR, naming it")
    func badSetting() {
        #expect(throws: (any Error).self) { try ServiceConfiguration.fromEnvironment(["SUBSYNC_TRUSTED_PROXIES": "10.0.0.0/8, proxy.example.com"]) }
        #expect(throws: (any Error).self) { try ServiceConfiguration.fromEnvironment(["SUBSYNC_TRUSTED_PROXIES": "0.0.0.0/0"]) }
        #expect(throws: (any Error).self) {
            try ServiceConfiguration.fromEnvironment(["SUBSYNC_TRUSTED_PROXIES": "10.0.0.0/8", "SUBSYNC_TRUSTED_PROXY_HEADER": "x-real-ip"])
        }
        #expect((try? ServiceConfiguration.fromEnvironment(["SUBSYNC_TRUSTED_PROXIES": "10.0.0.0/8, ::1"]))?.trustedProxies.cidrs.count == 2)
    }

    /// Posts a junk App Store notification from `client` (loopback) forwarded for `forwardedFor`.
    static func notify(_ client: some TestClientProtocol, forwardedFor: String?, header: String = "X-Forwarded-For") async throws -> HTTPResponse.Status {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let forwardedFor, let name = HTTPField.Name(header) { headers[name] = forwardedFor }
        return try await client.execute(
            uri: "/v1/notifications/apple", method: .post, headers: headers, body: ByteBuffer(string: #"{"signedPayload": 3}"#)
        ) { $0.status }
    }

    @Test("behind a trusted proxy a flooding client is limited and another client behind the same proxy is not; without the setting they share the proxy's bucket")
    func floodBehindAProxy() async throws {
        let limit = RateLimiter.Limit(ratePerSecond: 0.001, burst: 3)
        try await TestEnvironment.withFresh { env in
            let loopback = try TrustedProxies(list: "127.0.0.0/8, ::1/128")
            try await env.application(workers: 0, notificationRateLimit: limit, trustedProxies: loopback).testLive { client in
                // The flooder, who also writes a made-up address of its own to the left.
                for _ in 0..<3 {
                    let status1 = try await Self.notify(client, forwardedFor: "198.51.100.9, 203.0.113.5")
                    #expect(status1 == .badRequest)
                }
                let status2 = try await Self.notify(client, forwardedFor: "203.0.113.5")
                #expect(status2 == .tooManyRequests)
                let status3 = try await Self.notify(client, forwardedFor: "192.0.2.1, 203.0.113.5")
                #expect(status3 == .tooManyRequests, "a prepended hop does not escape")
                // Apple, behind the same proxy: answered.
                let status4 = try await Self.notify(client, forwardedFor: "198.51.100.7")
                #expect(status4 == .badRequest)
                let status5 = try await Self.notify(client, forwardedFor: "192.0.2.1, 198.51.100.8")
                #expect(status5 == .badRequest)
            }
            try await env.application(workers: 0, notificationRateLimit: limit).testLive { client in
                for _ in 0..<3 {
                    let status6 = try await Self.notify(client, forwardedFor: "203.0.113.5")
                    #expect(status6 == .badRequest)
                }
                let status7 = try await Self.notify(client, forwardedFor: "198.51.100.7")
                #expect(status7 == .tooManyRequests, "untrusted: one bucket for everyone")
            }
        }
    }
}
