import Foundation

extension UUID {
    /// The UUID as PostgreSQL writes it and as subsync shows ids (docs/API.md, "Ids"): lowercase,
    /// hyphenated. Written from a table: Foundation's `uuidString` formats through `snprintf`,
    /// a visible cost in a delivery loop (docs/PERFORMANCE.md, *In the code*).
    public var lowercasedText: String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(36)
        appendLowercasedText(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends ``lowercasedText``'s bytes to `bytes`.
    public func appendLowercasedText(to bytes: inout [UInt8]) {
        withUnsafeBytes(of: uuid) { raw in
            for (index, byte) in raw.enumerated() {
                if index == 4 || index == 6 || index == 8 || index == 10 { bytes.append(UInt8(ascii: "-")) }
                HexText.append(byte, to: &bytes)
            }
        }
    }

    /// Parses the hyphenated form (8-4-4-4-12 hex digits, either case), as PostgreSQL sends a
    /// `uuid`; nil for anything else. Foundation's `UUID(uuidString:)` parses through `sscanf`.
    public init?(hyphenatedText text: UnsafeBufferPointer<UInt8>) {
        guard text.count == 36 else { return nil }
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let parsed = withUnsafeMutableBytes(of: &value) { out -> Bool in
            var position = 0
            for index in 0..<16 {
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    guard text[position] == UInt8(ascii: "-") else { return false }
                    position += 1
                }
                guard let high = HexText.value(of: text[position]), let low = HexText.value(of: text[position + 1]) else { return false }
                out[index] = high << 4 | low
                position += 2
            }
            return true
        }
        guard parsed else { return nil }
        self.init(uuid: value)
    }
}
