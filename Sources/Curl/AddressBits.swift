/// A 128-bit unsigned value as two 64-bit halves: an address as one number (IPv4 in the low 32
/// bits), for masks and shifts. The standard library's `UInt128` would do, but it needs macOS 15,
/// and the package's floor is the dependencies' (macOS 13; docs/CLIENT.md *Platforms*).
public struct AddressBits: Sendable, Hashable {
    public var high: UInt64
    public var low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    public init(_ value: UInt32) {
        self.init(high: 0, low: UInt64(value))
    }

    public static let zero = AddressBits(high: 0, low: 0)
    public static let max = AddressBits(high: .max, low: .max)

    /// The low 32 bits.
    public var low32: UInt32 { UInt32(truncatingIfNeeded: low) }

    public static func & (lhs: AddressBits, rhs: AddressBits) -> AddressBits {
        AddressBits(high: lhs.high & rhs.high, low: lhs.low & rhs.low)
    }

    public static func | (lhs: AddressBits, rhs: AddressBits) -> AddressBits {
        AddressBits(high: lhs.high | rhs.high, low: lhs.low | rhs.low)
    }

    public static prefix func ~ (value: AddressBits) -> AddressBits {
        AddressBits(high: ~value.high, low: ~value.low)
    }

    /// Shifts right by `count` bits (0 for a count of 128 or more).
    public static func >> (value: AddressBits, count: Int) -> AddressBits {
        switch count {
        case ..<1: return value
        case 128...: return .zero
        case 64...: return AddressBits(high: 0, low: value.high >> (count - 64))
        default: return AddressBits(high: value.high >> count, low: value.low >> count | value.high << (64 - count))
        }
    }

    /// Shifts left by `count` bits (0 for a count of 128 or more).
    public static func << (value: AddressBits, count: Int) -> AddressBits {
        switch count {
        case ..<1: return value
        case 128...: return .zero
        case 64...: return AddressBits(high: value.low << (count - 64), low: 0)
        default: return AddressBits(high: value.high << count | value.low >> (64 - count), low: value.low << count)
        }
    }
}
