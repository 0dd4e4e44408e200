import Foundation

/// A value that reads itself from JSON text: the value Foundation's `JSONDecoder.postgres` would
/// decode from the same text, for the well-formed documents this service stores.
///
/// Workers read every existing account's state and transaction aggregates back, and every sync
/// answer reads the account's state: too hot a path for `JSONDecoder` (docs/PERFORMANCE.md,
/// *In the code*). ``JSONColumn`` uses a conformance when the column's type has one, and falls
/// back to `JSONDecoder` whenever the reader refuses the text (a shape it does not know, a
/// number that is not a plain integer), so an error still reads as `JSONDecoder`'s. Conformances
/// take their members in any order (`jsonb` reorders keys and adds spaces), ignore members they
/// do not know, as the decoders do, and are compared with `JSONDecoder` on generated values in
/// `JSONReadableTests`.
public protocol JSONReadable {
    init(json reader: inout JSONReader) throws
}

/// Why the reader refused a text (the caller then decodes it with `JSONDecoder`).
public struct JSONReadError: Error, CustomStringConvertible {
    public let description: String
    public let offset: Int
}

/// Reads JSON values one at a time from UTF-8 bytes, in document order.
///
/// Whatever it accepts, `JSONDecoder` decodes to the same value: it refuses what `JSONDecoder`
/// refuses or reads differently (a key twice in one object, where `JSONDecoder` keeps the first;
/// numbers with leading zeros; control characters in keys or strings; nesting deeper than
/// ``maximumDepth``) so that the caller falls back to `JSONDecoder`. It takes the bytes to be
/// valid UTF-8 (PostgreSQL's text is); invalid sequences would be repaired, not refused. A
/// reader and its ``JSONKey``s point into the caller's buffer: use them inside that call only.
public struct JSONReader {
    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    private var depth = 0
    /// Deeper documents are refused (the service's own are four levels deep; `JSONDecoder`
    /// allows 512).
    public static let maximumDepth = 32

    public init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    /// The value of `T` that `bytes` hold; whitespace only may follow it.
    public static func read<T: JSONReadable>(_ type: T.Type, from bytes: UnsafeBufferPointer<UInt8>) throws -> T {
        var reader = JSONReader(bytes)
        let value = try T(json: &reader)
        reader.skipWhitespace()
        guard reader.index == bytes.count else { throw reader.error("text after the value") }
        return value
    }

    /// An object: `member` is called with each key and must read (or ``skip()``) its value.
    public mutating func object(_ member: (inout JSONReader, JSONKey) throws -> Void) throws {
        try expect(UInt8(ascii: "{"))
        try enter()
        defer { depth -= 1 }
        skipWhitespace()
        if peek() == UInt8(ascii: "}") {
            index += 1
            return
        }
        var keys: [JSONKey] = []
        keys.reserveCapacity(16)
        while true {
            skipWhitespace()
            let key = try readKey()
            // JSONDecoder keeps a key's first value, a member callback would keep its last.
            guard !keys.contains(where: { $0.isSame(as: key) }) else { throw error("a key twice in one object") }
            keys.append(key)
            skipWhitespace()
            try expect(UInt8(ascii: ":"))
            try member(&self, key)
            skipWhitespace()
            switch next() {
            case UInt8(ascii: ","): continue
            case UInt8(ascii: "}"): return
            default: throw error("expected , or } in an object")
            }
        }
    }

    /// An array: `element` is called once per element and must read it.
    public mutating func array(_ element: (inout JSONReader) throws -> Void) throws {
        try expect(UInt8(ascii: "["))
        try enter()
        defer { depth -= 1 }
        skipWhitespace()
        if peek() == UInt8(ascii: "]") {
            index += 1
            return
        }
        while true {
            try element(&self)
            skipWhitespace()
            switch next() {
            case UInt8(ascii: ","): continue
            case UInt8(ascii: "]"): return
            default: throw error("expected , or ] in an array")
            }
        }
    }

    /// Whether the next value is `null`; if so it is read.
    public mutating func null() -> Bool {
        skipWhitespace()
        guard matches("null") else { return false }
        index += 4
        return true
    }

    public mutating func bool() throws -> Bool {
        skipWhitespace()
        if matches("true") {
            index += 4
            return true
        }
        if matches("false") {
            index += 5
            return false
        }
        throw error("expected true or false")
    }

    /// A plain integer (no fraction, no exponent: anything else is refused).
    public mutating func int() throws -> Int {
        skipWhitespace()
        let negative = peek() == UInt8(ascii: "-")
        if negative { index += 1 }
        let start = index
        var value = 0
        while let byte = peek(), byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
            let (times, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = negative
                ? times.subtractingReportingOverflow(Int(byte - UInt8(ascii: "0")))
                : times.addingReportingOverflow(Int(byte - UInt8(ascii: "0")))
            guard !overflow1, !overflow2 else { throw error("integer out of range") }
            value = sum
            index += 1
        }
        guard index > start else { throw error("expected an integer") }
        guard bytes[start] != UInt8(ascii: "0") || index == start + 1 else { throw error("a number with a leading zero") }
        if let byte = peek(), byte == UInt8(ascii: ".") || byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") {
            throw error("not a plain integer")
        }
        return value
    }

    public mutating func string() throws -> String {
        skipWhitespace()
        try expect(UInt8(ascii: "\""))
        let start = index
        // The common case: no escapes, one copy.
        while let byte = peek() {
            if byte == UInt8(ascii: "\"") {
                let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                index += 1
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            guard byte >= 0x20 else { throw error("control character in a string") }
            index += 1
        }
        var scalars = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while true {
            guard let byte = next() else { throw error("unterminated string") }
            switch byte {
            case UInt8(ascii: "\""):
                return String(decoding: scalars, as: UTF8.self)
            case UInt8(ascii: "\\"):
                try readEscape(into: &scalars)
            case 0..<0x20:
                throw error("control character in a string")
            default:
                scalars.append(byte)
            }
        }
    }

    /// A date as the service writes it (RFC 3339, or PostgreSQL's infinities), parsed where it
    /// lies in the text (a date has no escapes; one that has is read as a string first).
    public mutating func date() throws -> Date {
        skipWhitespace()
        try expect(UInt8(ascii: "\""))
        let start = index
        while let byte = peek(), byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") { index += 1 }
        guard peek() == UInt8(ascii: "\"") else {
            index = start - 1
            let text = try string()
            guard let date = PostgresTimestamp.parse(Array(text.utf8)) else { throw error("invalid date \(text)") }
            return date
        }
        let text = UnsafeBufferPointer(rebasing: bytes[start..<index])
        index += 1
        guard let date = PostgresTimestamp.parse(text) else { throw error("invalid date") }
        return date
    }

    /// Reads and discards the next value.
    public mutating func skip() throws {
        skipWhitespace()
        switch peek() {
        case UInt8(ascii: "{"): try object { reader, _ in try reader.skip() }
        case UInt8(ascii: "["): try array { try $0.skip() }
        case UInt8(ascii: "\""): _ = try string()
        case UInt8(ascii: "t"), UInt8(ascii: "f"): _ = try bool()
        case UInt8(ascii: "n"):
            guard null() else { throw error("expected null") }
        default:
            // A number: its characters, checked no further (the value is not used), as
            // JSONDecoder does with the members it does not decode; it starts as JSON's do.
            guard let first = peek(), first == UInt8(ascii: "-") || (first >= UInt8(ascii: "0") && first <= UInt8(ascii: "9")) else {
                throw error("expected a value")
            }
            let start = index
            while let byte = peek(), byte == UInt8(ascii: "-") || byte == UInt8(ascii: "+") || byte == UInt8(ascii: ".")
                || byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) {
                index += 1
            }
            guard index > start else { throw error("expected a value") }
        }
    }

    /// An error at the current position.
    public func error(_ message: String) -> JSONReadError {
        JSONReadError(description: "\(message) at byte \(index)", offset: index)
    }

    // MARK: - Bytes

    private func peek() -> UInt8? {
        index < bytes.count ? bytes[index] : nil
    }

    private mutating func next() -> UInt8? {
        guard index < bytes.count else { return nil }
        defer { index += 1 }
        return bytes[index]
    }

    private mutating func skipWhitespace() {
        while let byte = peek(), byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { index += 1 }
    }

    private mutating func enter() throws {
        depth += 1
        guard depth <= Self.maximumDepth else {
            depth -= 1
            throw error("nested deeper than \(Self.maximumDepth)")
        }
    }

    private mutating func expect(_ byte: UInt8) throws {
        skipWhitespace()
        guard next() == byte else { throw error("expected \(Character(Unicode.Scalar(byte)))") }
    }

    private func matches(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { return false }
        return word.withUTF8Buffer { word in
            (0..<count).allSatisfy { bytes[index + $0] == word[$0] }
        }
    }

    private mutating func readKey() throws -> JSONKey {
        guard peek() == UInt8(ascii: "\"") else { throw error("expected a key") }
        let start = index + 1
        var end = start
        var isASCII = true
        while end < bytes.count, bytes[end] != UInt8(ascii: "\""), bytes[end] != UInt8(ascii: "\\") {
            guard bytes[end] >= 0x20 else { throw error("control character in a key") }
            if bytes[end] >= 0x80 { isASCII = false }
            end += 1
        }
        if end < bytes.count, bytes[end] == UInt8(ascii: "\"") {
            index = end + 1
            return JSONKey(bytes: UnsafeBufferPointer(rebasing: bytes[start..<end]), escaped: nil, isASCII: isASCII)
        }
        return JSONKey(bytes: UnsafeBufferPointer(start: nil, count: 0), escaped: try string(), isASCII: false)
    }

    private mutating func readEscape(into scalars: inout [UInt8]) throws {
        switch next() {
        case UInt8(ascii: "\""): scalars.append(UInt8(ascii: "\""))
        case UInt8(ascii: "\\"): scalars.append(UInt8(ascii: "\\"))
        case UInt8(ascii: "/"): scalars.append(UInt8(ascii: "/"))
        case UInt8(ascii: "b"): scalars.append(0x08)
        case UInt8(ascii: "f"): scalars.append(0x0C)
        case UInt8(ascii: "n"): scalars.append(0x0A)
        case UInt8(ascii: "r"): scalars.append(0x0D)
        case UInt8(ascii: "t"): scalars.append(0x09)
        case UInt8(ascii: "u"):
            var code = try readHex4()
            if (0xD800..<0xDC00).contains(code) {
                // A high surrogate: a low one must follow.
                guard next() == UInt8(ascii: "\\"), next() == UInt8(ascii: "u") else { throw error("unpaired surrogate") }
                let low = try readHex4()
                guard (0xDC00..<0xE000).contains(low) else { throw error("unpaired surrogate") }
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
            }
            guard let scalar = Unicode.Scalar(code) else { throw error("invalid \\u escape") }
            scalars.append(contentsOf: String(Character(scalar)).utf8)
        default:
            throw error("invalid escape")
        }
    }

    private mutating func readHex4() throws -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let byte = next() else { throw error("short \\u escape") }
            guard let digit = HexText.value(of: byte) else { throw error("invalid \\u escape") }
            value = value << 4 | UInt32(digit)
        }
        return value
    }
}

/// An object member's key, compared with the names a type knows without building a `String`.
public struct JSONKey {
    fileprivate let bytes: UnsafeBufferPointer<UInt8>
    /// The key when it had escapes (never, for the keys this service writes).
    fileprivate let escaped: String?
    /// ASCII only, without escapes: equal as text exactly when equal as bytes.
    fileprivate let isASCII: Bool

    /// The key as a `String` (a dictionary's key).
    public var string: String {
        escaped ?? String(decoding: bytes, as: UTF8.self)
    }

    /// Whether two keys of one document are the same text.
    func isSame(as other: JSONKey) -> Bool {
        // Otherwise as `String`s, canonical equivalence included, as JSONDecoder's dictionary.
        guard isASCII, other.isASCII else { return string == other.string }
        guard bytes.count == other.bytes.count else { return false }
        guard let left = bytes.baseAddress, let right = other.bytes.baseAddress else { return bytes.isEmpty }
        return memcmp(left, right, bytes.count) == 0
    }

    public static func == (key: JSONKey, name: StaticString) -> Bool {
        if let escaped = key.escaped { return escaped == name.description }
        return name.withUTF8Buffer { name in
            guard name.count == key.bytes.count else { return false }
            guard let left = name.baseAddress, let right = key.bytes.baseAddress else { return name.isEmpty }
            return memcmp(left, right, name.count) == 0
        }
    }
}

/// A JSON array of readable elements (an account's device list, say).
extension Array: JSONReadable where Element: JSONReadable {
    public init(json reader: inout JSONReader) throws {
        var elements: [Element] = []
        try reader.array { elements.append(try Element(json: &$0)) }
        self = elements
    }
}
