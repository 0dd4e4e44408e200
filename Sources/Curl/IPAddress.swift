import CCurl

/// An IPv4 or IPv6 address, as connected to by a transfer or written in an allowlist.
public struct IPAddress: Sendable, Hashable, CustomStringConvertible {
    public enum Family: Sendable, Hashable {
        case v4
        case v6
    }

    public let family: Family
    /// The address as an unsigned integer: IPv4 in the low 32 bits, IPv6 in all 128.
    public let value: AddressBits

    public init(v4 value: UInt32) {
        self.family = .v4
        self.value = AddressBits(value)
    }

    public init(v6 value: AddressBits) {
        self.family = .v6
        self.value = value
    }

    /// Parses dotted-quad IPv4 or RFC 4291 IPv6 text (no zone index, no prefix length).
    public init?(_ text: String) {
        guard !text.isEmpty, text.utf8.count < 64, !text.utf8.contains(0) else { return nil }
        var bytes = [UInt8](repeating: 0, count: 16)
        let count = text.withCString { cText in
            bytes.withUnsafeMutableBufferPointer { subsync_parse_ip(cText, $0.baseAddress) }
        }
        self.init(bytes: bytes.prefix(Int(count)))
    }

    /// Builds an address from 4 (IPv4) or 16 (IPv6) bytes in network order.
    public init?(bytes: some Collection<UInt8>) {
        switch bytes.count {
        case 4:
            self.init(v4: bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        case 16:
            self.init(v6: bytes.reduce(AddressBits.zero) { $0 << 8 | AddressBits(UInt32($1)) })
        default:
            return nil
        }
    }

    /// The bit width of the family: 32 or 128.
    public var bitWidth: Int { family == .v4 ? 32 : 128 }

    /// The address bytes in network order (4 or 16 of them).
    public var bytes: [UInt8] {
        let count = bitWidth / 8
        return (0..<count).map { index in UInt8(truncatingIfNeeded: (value >> (8 * (count - 1 - index))).low) }
    }

    /// The IPv4 address embedded in an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`), if this is one.
    public var unmappedIPv4: IPAddress? {
        guard family == .v6, value >> 32 == AddressBits(0xFFFF) else { return nil }
        return IPAddress(v4: value.low32)
    }

    public var description: String {
        let bytes = self.bytes
        var text = [CChar](repeating: 0, count: 64)
        let ok = bytes.withUnsafeBufferPointer { bytePointer in
            text.withUnsafeMutableBufferPointer { textPointer in
                subsync_format_ip(bytePointer.baseAddress, Int32(bytes.count), textPointer.baseAddress, textPointer.count)
            }
        }
        guard ok == 1, let end = text.firstIndex(of: 0) else { return "<unprintable address>" }
        return String(decoding: text[..<end].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
