/// Which peer addresses transfers may connect to.
///
/// The check runs on the address libcurl is about to connect to (from `CURLOPT_OPENSOCKETFUNCTION`),
/// after name resolution, so a host name that resolves — or re-resolves — to a private address is
/// refused just like the literal address would be (this defeats DNS rebinding).
public struct AddressGuard: Sendable {
    /// A CIDR in an allowlist that does not parse; `description` names it.
    public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    /// An address block: a network address and a prefix length.
    public struct CIDR: Sendable, Hashable, CustomStringConvertible {
        public let network: IPAddress
        public let prefixLength: Int

        /// Parses `a.b.c.d/n`, `x:y::z/n`, or a bare address (a single-host block).
        /// Host bits below the prefix are cleared: `10.1.2.3/8` is `10.0.0.0/8`.
        public init(_ text: String) throws(ParseError) {
            let trimmed = text.trimmingASCIIWhitespace()
            let parts = trimmed.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let address = parts.first.flatMap({ IPAddress(String($0)) }) else {
                throw ParseError("invalid CIDR \"\(text)\": \"\(parts.first ?? "")\" is not an IPv4 or IPv6 address")
            }
            var length = address.bitWidth
            if parts.count == 2 {
                let digits = parts[1]
                guard !digits.isEmpty, digits.count <= 3, digits.allSatisfy({ $0.isASCII && $0.isNumber }),
                      let parsed = Int(digits), parsed <= address.bitWidth
                else {
                    throw ParseError(
                        "invalid CIDR \"\(text)\": prefix length must be a number from 0 to \(address.bitWidth)")
                }
                length = parsed
            }
            self.init(network: address, prefixLength: length)
        }

        /// The block of `prefixLength` bits (clamped to the family's width) that holds `network`.
        public init(network: IPAddress, prefixLength: Int) {
            let length = max(0, min(prefixLength, network.bitWidth))
            let mask = Self.mask(length, width: network.bitWidth)
            self.network = network.family == .v4
                ? IPAddress(v4: (network.value & mask).low32)
                : IPAddress(v6: network.value & mask)
            self.prefixLength = length
        }

        public func contains(_ address: IPAddress) -> Bool {
            guard address.family == network.family else { return false }
            let mask = Self.mask(prefixLength, width: network.bitWidth)
            return address.value & mask == network.value
        }

        public var description: String { "\(network)/\(prefixLength)" }

        private static func mask(_ length: Int, width: Int) -> AddressBits {
            guard length > 0 else { return .zero }
            let all = width == 32 ? AddressBits(UInt32.max) : .max
            return all & ~(all >> length)
        }
    }

    /// Blocks admitted despite not being public.
    public let allowed: [CIDR]

    /// Refuses non-public addresses (see `isPublic`) unless a CIDR in `allow` admits them.
    public init(allow: [String]) throws(ParseError) {
        var cidrs: [CIDR] = []
        for text in allow {
            cidrs.append(try CIDR(text))
        }
        self.allowed = cidrs
    }

    public init(allowing cidrs: [CIDR]) {
        self.allowed = cidrs
    }

    /// Only public (globally routable unicast) addresses.
    public static let publicOnly = AddressGuard(allowing: [])

    /// Parses `SUBSYNC_WEBHOOK_ALLOW` style text: CIDRs separated by commas and/or whitespace,
    /// such as `"127.0.0.0/8, ::1/128"`. Empty text is `publicOnly`.
    public init(allowList text: String) throws(ParseError) {
        let items = text.split(whereSeparator: { $0 == "," || $0.isWhitespace }).map(String.init)
        try self.init(allow: items)
    }

    /// Whether a transfer may connect to `address`.
    public func permits(_ address: IPAddress) -> Bool {
        let unmapped = address.unmappedIPv4
        for cidr in allowed where cidr.contains(address) || unmapped.map(cidr.contains) == true {
            return true
        }
        return Self.isPublic(address)
    }

    /// `permits` for address text; text that is not an address is never permitted.
    public func permits(ipString: String) -> Bool {
        guard let address = IPAddress(ipString) else { return false }
        return permits(address)
    }

    // MARK: - What counts as public

    /// IPv4 blocks that are not globally reachable unicast (IANA special-purpose registry, RFC 6890 and successors).
    private static let nonPublicV4: [CIDR] = [
        "0.0.0.0/8",  // "this network", including the unspecified address
        "10.0.0.0/8",  // private
        "100.64.0.0/10",  // carrier-grade NAT
        "127.0.0.0/8",  // loopback
        "169.254.0.0/16",  // link-local (and cloud metadata endpoints)
        "172.16.0.0/12",  // private
        "192.0.0.0/24",  // IETF protocol assignments
        "192.0.2.0/24",  // documentation (TEST-NET-1)
        "192.31.196.0/24",  // AS112
        "192.52.193.0/24",  // AMT
        "192.88.99.0/24",  // 6to4 relay anycast (deprecated)
        "192.168.0.0/16",  // private
        "192.175.48.0/24",  // AS112 direct delegation
        "198.18.0.0/15",  // benchmarking
        "198.51.100.0/24",  // documentation (TEST-NET-2)
        "203.0.113.0/24",  // documentation (TEST-NET-3)
        "224.0.0.0/4",  // multicast
        "240.0.0.0/4",  // reserved, including the limited broadcast 255.255.255.255
    ].map(staticCIDR)

    /// Within 2000::/3 (the only IPv6 block assigned for global unicast), blocks that are not public.
    private static let nonPublicV6: [CIDR] = [
        "2001::/32",  // Teredo (tunnels to arbitrary IPv4 addresses)
        "2001:2::/48",  // benchmarking
        "2001:10::/28",  // ORCHID (deprecated)
        "2001:db8::/32",  // documentation
        "3fff::/20",  // documentation (RFC 9637)
    ].map(staticCIDR)

    private static let globalUnicastV6 = staticCIDR("2000::/3")
    private static let sixToFour = staticCIDR("2002::/16")
    private static let nat64 = staticCIDR("64:ff9b::/96")

    private static func staticCIDR(_ text: String) -> CIDR {
        do {
            return try CIDR(text)
        } catch {
            // Only reachable if a literal above is mistyped; the unit tests parse every one.
            preconditionFailure("bad built-in CIDR \(text): \(error)")
        }
    }

    /// Whether `address` is a globally reachable unicast address.
    /// IPv4 embedded in IPv6 (IPv4-mapped `::ffff:0:0/96`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`)
    /// is judged by the embedded IPv4 address.
    public static func isPublic(_ address: IPAddress) -> Bool {
        switch address.family {
        case .v4:
            return !nonPublicV4.contains { $0.contains(address) }
        case .v6:
            if let v4 = address.unmappedIPv4 {
                return isPublic(v4)
            }
            if nat64.contains(address) {
                return isPublic(IPAddress(v4: address.value.low32))
            }
            if sixToFour.contains(address) {
                return isPublic(IPAddress(v4: (address.value >> 80).low32))
            }
            // Outside 2000::/3: unspecified, loopback, IPv4-compatible, discard-only, unique-local
            // fc00::/7, link-local fe80::/10, site-local fec0::/10, multicast ff00::/8, unassigned space.
            guard globalUnicastV6.contains(address) else { return false }
            return !nonPublicV6.contains { $0.contains(address) }
        }
    }
}
