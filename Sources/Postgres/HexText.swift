/// Lowercase hexadecimal text of bytes (digests, key ids, JSON's `\u00XX` escapes): two digits
/// a byte, written from a table rather than by a `String(format:)` call per byte.
public enum HexText {
    private static let digits = Array("0123456789abcdef".utf8)

    /// `bytes` as lowercase hex, two digits each.
    public static func lowercase(_ bytes: some Sequence<UInt8>) -> String {
        var text: [UInt8] = []
        text.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes { append(byte, to: &text) }
        return String(decoding: text, as: UTF8.self)
    }

    /// Appends the two lowercase hex digits of `byte` to `text`.
    public static func append(_ byte: UInt8, to text: inout [UInt8]) {
        text.append(digits[Int(byte >> 4)])
        text.append(digits[Int(byte & 0x0F)])
    }
}
