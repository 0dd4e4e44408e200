import Foundation

/// Decimal text of times in the form the fact digest pins (`ReportInbox.factDigest`, sql/0007):
/// what `String(format: "%.6f", value)` writes, without a printf call per field (five a
/// verified report; docs/PERFORMANCE.md, "In the code").
public enum DecimalText {
    /// `value` with six decimals, exactly as `String(format: "%.6f", value)` writes it: the
    /// binary value rounded to six decimals, ties to even (glibc's printf in its default
    /// rounding mode).
    ///
    /// Computed in integers for `256 ≤ |value| < 2⁶³` (every time after 1970-01-01T00:04:16Z,
    /// which is what digests hold): there, at most 44 bits of the significand are fractional,
    /// so the fraction times 10⁶ fits 64 bits and is exact. Any other value goes to printf.
    public static func sixDecimals(_ value: Double) -> String {
        let magnitude = value.magnitude
        guard value.isFinite, magnitude >= 256, magnitude < 0x1p63 else { return String(format: "%.6f", value) }
        let exponent = Int(magnitude.exponent)
        let significand = (UInt64(1) << 52) | magnitude.significandBitPattern
        let fractionalBits = 52 - exponent
        var integer: UInt64
        var micros: UInt64
        if fractionalBits <= 0 {
            integer = significand << UInt64(-fractionalBits)
            micros = 0
        } else {
            let mask = (UInt64(1) << UInt64(fractionalBits)) - 1
            integer = significand >> UInt64(fractionalBits)
            // fraction < 2^44 and 10^6 < 2^20: the product is exact in 64 bits.
            let scaled = (significand & mask) * 1_000_000
            micros = scaled >> UInt64(fractionalBits)
            let remainder = scaled & mask
            let half = UInt64(1) << UInt64(fractionalBits - 1)
            if remainder > half || (remainder == half && micros & 1 == 1) { micros += 1 }
            if micros == 1_000_000 {
                micros = 0
                integer += 1
            }
        }
        var text: [UInt8] = []
        text.reserveCapacity(28)
        if value < 0 { text.append(UInt8(ascii: "-")) }
        text.append(contentsOf: String(integer).utf8)
        text.append(UInt8(ascii: "."))
        var digits = [UInt8](repeating: UInt8(ascii: "0"), count: 6)
        var rest = micros
        for index in stride(from: 5, through: 0, by: -1) {
            digits[index] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
        }
        text.append(contentsOf: digits)
        return String(decoding: text, as: UTF8.self)
    }
}
