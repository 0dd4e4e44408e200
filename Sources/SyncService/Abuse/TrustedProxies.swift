import Curl
import Foundation
import HTTPTypes

/// The reverse proxies (TLS terminators, load balancers) in front of `serve`
/// (`SUBSYNC_TRUSTED_PROXIES`, docs/SECURITY.md): only when the TCP peer is one of them is the
/// client's address taken from the header those proxies write (`SUBSYNC_TRUSTED_PROXY_HEADER`:
/// `X-Forwarded-For`, or `Forwarded`; only that one, since a proxy that writes the other passes a
/// client's own copy through), as the right-most hop that is not a trusted proxy: the one the
/// nearest trusted proxy appended, which a client cannot forge (what a client puts in the header
/// itself stands to the left of it). Used for the limits by source address (App Store
/// notifications, AdMob callbacks), which otherwise count every caller behind a proxy as one.
/// Device and account limits do not use it.
///
/// The key is the address, an IPv6 one by its /64 (a host usually has a whole /64, so one per
/// address would give it 2^64 buckets).
public struct TrustedProxies: Sendable {
    public let cidrs: [AddressGuard.CIDR]
    /// The header the trusted proxies write.
    public let header: Header

    public enum Header: String, Sendable {
        case xForwardedFor = "x-forwarded-for"
        case forwarded
    }

    /// No proxy trusted: the client is the TCP peer.
    public static let none = TrustedProxies(cidrs: [])

    /// The most hops read from the headers (a chain of proxies is short; the rest is ignored).
    static let maximumHops = 20

    public init(cidrs: [AddressGuard.CIDR], header: Header = .xForwardedFor) {
        self.cidrs = cidrs
        self.header = header
    }

    /// Parses a comma-separated list of CIDRs or addresses (`10.0.0.0/8, 192.0.2.7, ::1/128`);
    /// empty text trusts none. A /0 (every address a proxy) is refused: any client could then
    /// name its own key.
    public init(list text: String, header: Header = .xForwardedFor) throws(AddressGuard.ParseError) {
        var cidrs: [AddressGuard.CIDR] = []
        for part in text.split(separator: ",") where !part.allSatisfy({ $0 == " " || $0 == "\t" }) {
            let cidr = try AddressGuard.CIDR(String(part))
            guard cidr.prefixLength > 0 else { throw AddressGuard.ParseError("\(cidr) would trust every client as a proxy") }
            cidrs.append(cidr)
        }
        self.init(cidrs: cidrs, header: header)
    }

    /// Whether `address` is a trusted proxy (an IPv4-mapped IPv6 address as its IPv4 one).
    func trusts(_ address: IPAddress) -> Bool {
        let address = address.unmappedIPv4 ?? address
        return cidrs.contains { $0.contains(address) }
    }

    /// The client's address of a request that came from `peer` (the TCP peer's address text)
    /// with `headers`, as text for a rate-limit key: the peer itself unless it is trusted.
    public func clientAddress(peer: String?, headers: HTTPFields) -> String {
        guard let peer else { return "unknown" }
        guard let peerAddress = IPAddress(peer) else { return peer }
        guard !cidrs.isEmpty, trusts(peerAddress) else { return Self.key(peerAddress) }
        let hops = Self.forwardedHops(headers, header: header)
        guard !hops.isEmpty else { return Self.key(peerAddress) }
        for hop in hops.reversed() {
            // A hop that is not an address was not written by a proxy we trust: the chain is
            // not to be read past it, and a made-up text must never become a key of its own.
            guard let address = IPAddress(hop) else { return Self.key(peerAddress) }
            if !trusts(address) { return Self.key(address) }
        }
        // Every hop is a trusted proxy: the left-most is as far as the chain goes.
        return hops.first.flatMap(IPAddress.init).map(Self.key) ?? Self.key(peerAddress)
    }

    /// The rate-limit key of `address`: an IPv4 address (mapped ones unmapped) as it is, an
    /// IPv6 one as its /64.
    static func key(_ address: IPAddress) -> String {
        let address = address.unmappedIPv4 ?? address
        guard address.family == .v6 else { return address.description }
        return AddressGuard.CIDR(network: address, prefixLength: 64).description
    }

    /// The hops of `X-Forwarded-For` (all its fields, in order), or of `Forwarded`'s `for=`
    /// parameters, as `header` says, as address texts (brackets, quotes and ports removed); at most the last
    /// ``maximumHops``.
    static func forwardedHops(_ headers: HTTPFields, header: Header) -> [String] {
        var hops: [String] = []
        if header == .xForwardedFor, let name = HTTPField.Name("X-Forwarded-For") {
            for value in headers[values: name] {
                hops += value.split(separator: ",").map { host(String($0)) }
            }
        }
        if header == .forwarded, let name = HTTPField.Name("Forwarded") {
            for value in headers[values: name] {
                for element in value.split(separator: ",") {
                    for pair in element.split(separator: ";") {
                        let parts = pair.split(separator: "=", maxSplits: 1)
                        guard parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces).lowercased() == "for" else { continue }
                        hops.append(host(String(parts[1])))
                    }
                }
            }
        }
        return Array(hops.suffix(maximumHops))
    }

    /// The address part of a hop: `"[2001:db8::1]:4711"` → `2001:db8::1`, `192.0.2.1:80` →
    /// `192.0.2.1`, quotes and whitespace removed.
    static func host(_ text: String) -> String {
        var hop = text.trimmingCharacters(in: .whitespaces)
        if hop.hasPrefix("\""), hop.hasSuffix("\""), hop.count >= 2 { hop = String(hop.dropFirst().dropLast()) }
        if hop.hasPrefix("[") {
            guard let close = hop.firstIndex(of: "]") else { return hop }
            return String(hop[hop.index(after: hop.startIndex)..<close])
        }
        // One colon: IPv4 with a port. More: a bare IPv6 address.
        if hop.filter({ $0 == ":" }).count == 1, let colon = hop.firstIndex(of: ":") { return String(hop[..<colon]) }
        return hop
    }
}
