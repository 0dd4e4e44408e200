// ASCII helpers for the Curl module's parsing: environment lists (AddressGuard) and HTTP headers.

extension String {
    /// Without leading and trailing ASCII whitespace (space, tab, CR, LF, VT, FF): what HTTP
    /// calls optional whitespace, and what a list in an environment variable may carry. Works
    /// on the UTF-8 bytes: a Unicode property lookup is a visible cost of every response header
    /// (docs/PERFORMANCE.md, *In the code*).
    func trimmingASCIIWhitespace() -> String {
        let bytes = utf8
        guard let start = bytes.firstIndex(where: { !$0.isASCIIWhitespace }),
              let end = bytes.lastIndex(where: { !$0.isASCIIWhitespace })
        else { return "" }
        return String(decoding: bytes[start...end], as: UTF8.self)
    }
}

extension String {
    /// Whether this equals `lowercase` (ASCII, lowercase) when ASCII letters are compared
    /// regardless of case: header names are ASCII tokens.
    func equalsASCIICaseInsensitively(_ lowercase: StaticString) -> Bool {
        let other = UnsafeBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount)
        guard utf8.count == other.count else { return false }
        return zip(utf8, other).allSatisfy { $0.asciiLowercased == $1 }
    }
}

extension UInt8 {
    var isASCIIWhitespace: Bool {
        self == 0x20 || (0x09...0x0D).contains(self)
    }

    /// An ASCII capital letter as its lowercase letter; every other byte as it is.
    var asciiLowercased: UInt8 {
        (0x41...0x5A).contains(self) ? self | 0x20 : self
    }
}
