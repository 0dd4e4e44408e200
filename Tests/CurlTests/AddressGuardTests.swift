import Curl
import Testing

@Suite("AddressGuard")
struct AddressGuardTests {
    @Test(
        "public addresses are permitted",
        arguments: [
            "8.8.8.8", "1.1.1.1", "93.184.216.34", "100.63.255.255", "100.128.0.0", "172.15.255.255",
            "172.32.0.0", "192.167.255.255", "192.169.0.0", "223.255.255.255", "11.0.0.0",
            "2606:4700::1", "2a00:1450:4001:80b::200e", "2001:4860:4860::8888",
            "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1",
        ])
    func publicPermitted(_ address: String) {
        #expect(AddressGuard.publicOnly.permits(ipString: address), "\(address) should be permitted")
    }

    @Test(
        "non-public addresses are refused",
        arguments: [
            // private, loopback, link-local, CGNAT, this-network
            "10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.255", "192.168.0.1", "192.168.255.255",
            "127.0.0.1", "127.255.255.254", "169.254.169.254", "169.254.0.1", "100.64.0.1", "100.127.255.255",
            "0.0.0.0", "0.1.2.3",
            // broadcast, multicast, reserved, documentation, benchmarking, protocol assignments
            "255.255.255.255", "224.0.0.1", "239.255.255.250", "240.0.0.1", "192.0.2.1", "198.51.100.7",
            "203.0.113.9", "198.18.0.1", "198.19.255.255", "192.0.0.8",
            // IPv6
            "::", "::1", "fe80::1", "febf::1", "fc00::1", "fd12:3456::1", "ff02::1", "ff05::2", "fec0::1",
            "2001:db8::1", "2001::1", "100::1", "::2", "::127.0.0.1",
            // IPv4 embedded in IPv6
            "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::ffff:0.0.0.0",
            "64:ff9b::a00:1", "64:ff9b::7f00:1", "2002:7f00:1::1", "2002:a00:1::",
        ])
    func nonPublicRefused(_ address: String) {
        #expect(!AddressGuard.publicOnly.permits(ipString: address), "\(address) should be refused")
    }

    @Test("text that is not an address is never permitted", arguments: ["", "abc", "1.2.3", "1.2.3.4.5", "256.1.1.1", "8.8.8.8/32", "[::1]", "fe80::1%eth0", " 8.8.8.8"])
    func garbageRefused(_ text: String) {
        #expect(!AddressGuard.publicOnly.permits(ipString: text))
        #expect(IPAddress(text) == nil)
    }

    @Test("allowlist CIDR edges")
    func allowlistEdges() throws {
        let tens = try AddressGuard(allow: ["10.0.0.0/8"])
        #expect(tens.permits(ipString: "10.0.0.0"))
        #expect(tens.permits(ipString: "10.255.255.255"))
        #expect(tens.permits(ipString: "::ffff:10.1.2.3"))
        let tenBlock = try AddressGuard.CIDR("10.0.0.0/8")
        #expect(try tenBlock.contains(#require(IPAddress("10.255.255.255"))))
        #expect(try !tenBlock.contains(#require(IPAddress("11.0.0.0"))))
        #expect(try !tenBlock.contains(#require(IPAddress("9.255.255.255"))))
        #expect(try !tenBlock.contains(#require(IPAddress("::ffff:10.0.0.1"))), "a block holds one family")
        #expect(!tens.permits(ipString: "127.0.0.1"))
        #expect(tens.permits(ipString: "8.8.8.8"), "public addresses stay permitted")

        let loopback = try AddressGuard(allow: ["127.0.0.0/8", "::1/128"])
        #expect(loopback.permits(ipString: "127.0.0.1"))
        #expect(loopback.permits(ipString: "127.255.255.255"))
        #expect(loopback.permits(ipString: "::1"))
        #expect(loopback.permits(ipString: "::ffff:127.0.0.1"))
        #expect(!loopback.permits(ipString: "::2"))
        #expect(loopback.permits(ipString: "128.0.0.0"))  // public
        #expect(!loopback.permits(ipString: "192.168.1.1"))

        let narrow = try AddressGuard(allow: ["192.168.1.16/28", "fd00:1::/32"])
        #expect(narrow.permits(ipString: "192.168.1.16"))
        #expect(narrow.permits(ipString: "192.168.1.31"))
        #expect(!narrow.permits(ipString: "192.168.1.15"))
        #expect(!narrow.permits(ipString: "192.168.1.32"))
        #expect(narrow.permits(ipString: "fd00:1:ffff::1"))
        #expect(!narrow.permits(ipString: "fd00:2::1"))

        let host = try AddressGuard(allow: ["169.254.169.254"])
        #expect(host.permits(ipString: "169.254.169.254"))
        #expect(!host.permits(ipString: "169.254.169.253"))

        let everything = try AddressGuard(allow: ["0.0.0.0/0", "::/0"])
        #expect(everything.permits(ipString: "0.0.0.0"))
        #expect(everything.permits(ipString: "255.255.255.255"))
        #expect(everything.permits(ipString: "fe80::1"))

        let hostBits = try AddressGuard.CIDR("10.1.2.3/8")
        #expect(hostBits.description == "10.0.0.0/8")
        #expect(try AddressGuard.CIDR("2001:db8::1/32").description == "2001:db8::/32")
    }

    @Test("allowlist text: commas and spaces, empty means public only")
    func allowlistText() throws {
        let parsed = try AddressGuard(allowList: " 127.0.0.0/8,::1/128  10.0.0.0/8 ,\n")
        #expect(parsed.allowed.map(\.description) == ["127.0.0.0/8", "::1/128", "10.0.0.0/8"])
        #expect(parsed.permits(ipString: "127.0.0.1"))
        #expect(parsed.permits(ipString: "::1"))
        #expect(parsed.permits(ipString: "10.9.9.9"))
        #expect(!parsed.permits(ipString: "192.168.0.1"))

        for empty in ["", "  ", ",", " , "] {
            let guardrail = try AddressGuard(allowList: empty)
            #expect(guardrail.allowed.isEmpty)
            #expect(!guardrail.permits(ipString: "127.0.0.1"))
            #expect(guardrail.permits(ipString: "1.1.1.1"))
        }
    }

    @Test(
        "bad CIDRs are rejected with a message naming them",
        arguments: ["10.0.0.0/33", "abc", "1.2.3.4/-1", "::1/129", "10.0.0.0/", "10.0.0.0/8/8", "/8", "10.0.0.0/ 8", "10.0.0/8", "1.2.3.4/+8", "1.2.3.4/0x8"])
    func badCIDR(_ text: String) {
        do {
            _ = try AddressGuard(allow: ["127.0.0.0/8", text])
            Issue.record("\(text) was accepted")
        } catch {
            #expect(error.description.contains("\"\(text)\""), "message: \(error.description)")
        }
        #expect(throws: AddressGuard.ParseError.self) { try AddressGuard(allowList: "::1/128, \(text)") }
    }

    @Test("IPAddress parses and prints both families")
    func ipAddressRoundTrip() throws {
        for text in ["127.0.0.1", "8.8.8.8", "::1", "2606:4700::1", "fe80::1", "::ffff:127.0.0.1", "::"] {
            let address = try #require(IPAddress(text))
            #expect(address.description == text)
            #expect(IPAddress(bytes: address.bytes) == address)
        }
        #expect(IPAddress("::ffff:127.0.0.1")?.unmappedIPv4 == IPAddress("127.0.0.1"))
        #expect(IPAddress("127.0.0.1")?.family == .v4)
        #expect(IPAddress("::1")?.family == .v6)
    }
}
