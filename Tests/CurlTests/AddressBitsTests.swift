import Curl
import PropertyBased
import Testing

/// `AddressBits` (two 64-bit halves; the package's floor has no `UInt128`) agrees with the
/// standard library's `UInt128` wherever that exists: every operation the address code uses, on
/// random values and shift counts, including the halves' boundary.
@Suite("AddressBits against UInt128")
struct AddressBitsTests {
    @Test("&, |, ~, >> and << agree with UInt128 for any values and shift counts")
    func agreesWithUInt128() async {
        guard #available(macOS 15, iOS 18, *) else { return }
        func wide(_ bits: AddressBits) -> UInt128 { UInt128(bits.high) << 64 | UInt128(bits.low) }
        await propertyCheck(count: 3000, input: Gen.uint64(), Gen.uint64(), Gen.uint64(), Gen.uint64(), Gen.int(in: 0...140)) { a, b, c, d, shift in
            let x = AddressBits(high: a, low: b)
            let y = AddressBits(high: c, low: d)
            let (wx, wy) = (wide(x), wide(y))
            #expect(wide(x & y) == wx & wy)
            #expect(wide(x | y) == wx | wy)
            #expect(wide(~x) == ~wx)
            #expect(wide(x >> shift) == (shift >= 128 ? 0 : wx >> shift), "\(x) >> \(shift)")
            #expect(wide(x << shift) == (shift >= 128 ? 0 : wx << shift), "\(x) << \(shift)")
            #expect((x == y) == (wx == wy))
            #expect(x.low32 == UInt32(truncatingIfNeeded: wx))
        }
        for shift in [0, 1, 31, 32, 63, 64, 65, 80, 96, 127, 128] {
            #expect(wide(AddressBits.max >> shift) == (shift == 128 ? 0 : UInt128.max >> shift))
            #expect(wide(AddressBits.max << shift) == (shift == 128 ? 0 : UInt128.max << shift))
        }
    }
}
