import Foundation
import PropertyBased
import SyncStore
import Testing

/// `DecimalText.sixDecimals` writes what `String(format: "%.6f")` writes (the fact digest's
/// pinned form, sql/0007), checked against printf itself over the inputs that reach it and
/// over every kind of double.
@Suite struct DecimalTextTests {
    static func printf(_ value: Double) -> String { String(format: "%.6f", value) }

    @Test func sixDecimalsIsPrintfForMillisecondTimestamps() async {
        // StoreKit's dates: milliseconds since 1970, divided by 1,000 (JSONDecoder's strategy).
        await propertyCheck(count: 2000, input: Gen.int64(in: 0...4_102_444_800_000)) { milliseconds in
            let value = Double(milliseconds) / 1000
            #expect(DecimalText.sixDecimals(value) == Self.printf(value))
            #expect(DecimalText.sixDecimals(-value) == Self.printf(-value))
        }
    }

    @Test func sixDecimalsIsPrintfForAnyDouble() async {
        // Every exponent and every fraction, NaN and infinities included (those go to printf).
        await propertyCheck(count: 5000, input: Gen.uint64()) { bits in
            let value = Double(bitPattern: bits)
            #expect(DecimalText.sixDecimals(value) == Self.printf(value), "\(bits)")
        }
        await propertyCheck(count: 3000, input: Gen.double(in: -1e12...1e12)) { value in
            #expect(DecimalText.sixDecimals(value) == Self.printf(value))
        }
    }

    @Test func sixDecimalsRoundsTiesToEvenLikePrintf() async {
        // Fractions of k / 2^m: the exact decimal expansion ends in 5 at the seventh decimal and
        // beyond, so these are the ties and near-ties of rounding to six decimals.
        await propertyCheck(count: 3000, input: Gen.int(in: 256...1_000_000_000), Gen.int(in: 7...30), Gen.uint64()) { seconds, bits, numerator in
            let fraction = Double(numerator % (UInt64(1) << UInt64(bits))) / Double(UInt64(1) << UInt64(bits))
            let value = Double(seconds) + fraction
            #expect(DecimalText.sixDecimals(value) == Self.printf(value), "\(value)")
        }
        for value in [256.0078125, 256.0234375, 1_750_000_000.5, 1_750_000_000.123456, 255.9999995, 256.0, 0x1p52, 0x1p53 + 2,
                      0x1p63 - 1024, 0x1p63, -256.0078125, 999_999.9999995, 0, -0.0, 0.0000005, .nan, .infinity, -.infinity] {
            #expect(DecimalText.sixDecimals(value) == Self.printf(value), "\(value)")
        }
    }
}
