import Foundation

/// One bind parameter as it goes to the server.
///
/// Text values are sent with an unspecified type (OID 0) so the server infers the type from
/// the statement, exactly as for a literal; casts in SQL (`$1::uuid`) settle ambiguity.
/// Bytes go in binary format as `bytea`; arrays of strings, integers, booleans, ids, dates and
/// doubles in binary format with their array type (``binaryArray(type:bytes:)``).
public enum PostgresValue: Sendable, Hashable {
    case null
    case text(String)
    case bytes([UInt8])
    /// An array in PostgreSQL's binary array format (`array_recv`) with its array type's OID
    /// (`text[]`, `int8[]`, `bool[]`, `uuid[]`, `timestamptz[]`, `float8[]`): no text for the
    /// client to write nor for the server to parse (`array_in` and the elements' input
    /// functions), most of the cost of binding an array (docs/PERFORMANCE.md, *In the code*).
    /// The parameter has that type: a cast in SQL converts from it (`$1::int[]` from `int8[]`,
    /// `$1::text[]::uuid[]` from `text[]`).
    case binaryArray(type: UInt32, bytes: [UInt8])

    /// A `text[]` in binary format.
    public static func textArray(_ bytes: [UInt8]) -> PostgresValue { .binaryArray(type: 1009, bytes: bytes) }

    /// The type the parameter is declared with (0: the server infers it from the statement).
    var declaredType: UInt32 {
        switch self {
        case .null, .text: 0
        case .bytes: 17  // bytea
        case .binaryArray(let type, _): type
        }
    }
}

/// A Swift value that can be bound as a statement parameter.
public protocol PostgresEncodable: Sendable {
    var postgresValue: PostgresValue { get }
}

extension PostgresValue: PostgresEncodable {
    public var postgresValue: PostgresValue { self }
}

extension String: PostgresEncodable {
    public var postgresValue: PostgresValue { .text(self) }
}

extension Substring: PostgresEncodable {
    public var postgresValue: PostgresValue { .text(String(self)) }
}

extension Int: PostgresEncodable {
    public var postgresValue: PostgresValue { .text(String(self)) }
}

extension Int64: PostgresEncodable {
    public var postgresValue: PostgresValue { .text(String(self)) }
}

extension Int32: PostgresEncodable {
    public var postgresValue: PostgresValue { .text(String(self)) }
}

extension Bool: PostgresEncodable {
    public var postgresValue: PostgresValue { .text(self ? "t" : "f") }
}

extension Double: PostgresEncodable {
    public var postgresValue: PostgresValue {
        if isNaN { return .text("NaN") }
        if isInfinite { return .text(self > 0 ? "Infinity" : "-Infinity") }
        return .text("\(self)")
    }
}

extension UUID: PostgresEncodable {
    public var postgresValue: PostgresValue { .text(lowercasedText) }
}

extension Date: PostgresEncodable {
    public var postgresValue: PostgresValue { .text(PostgresTimestamp.format(self)) }
}

extension Data: PostgresEncodable {
    public var postgresValue: PostgresValue { .bytes([UInt8](self)) }
}

extension Array: PostgresEncodable where Element: PostgresArrayElement {
    /// Arrays of elements with a binary form go in binary format (``PostgresValue/binaryArray(type:bytes:)``);
    /// others as a PostgreSQL array literal (`{"a","b",NULL}`). Bind either with a cast such as
    /// `$1::text[]`, which also makes `unnest($1::text[], ...)` batch inserts possible.
    ///
    /// Inlinable, with ``binaryArray(_:)``: callers in other modules get it specialized for
    /// their element type, not a witness-table call and a generic copy per element (a sync's
    /// reports bind 21 arrays each; docs/PERFORMANCE.md, *In the code*).
    @inlinable
    public var postgresValue: PostgresValue {
        if let types = Element.binaryArrayType, let binary = binaryArray(types) { return binary }
        return .text(literal())
    }

    /// PostgreSQL's binary array format (`array_send`): dimensions, flags, element type, then
    /// each element as a length (-1 for NULL) and its bytes, integers big-endian. `nil` when a
    /// string holds a NUL byte, which `text` cannot: the literal then carries it to the check
    /// that refuses it with a clear error before anything is sent.
    @inlinable
    func binaryArray(_ types: (element: UInt32, array: UInt32)) -> PostgresValue? {
        let isText = types.element == 25
        var bytes: [UInt8] = []
        // Strings (JSON documents, often) are sized exactly; other elements take at most 16 bytes.
        var size = 20 + count * 20
        if isText { size = 20 + reduce(0) { $0 + 4 + ($1.arrayElementText?.utf8.count ?? 0) } }
        bytes.reserveCapacity(size)
        func append(_ value: Int32) {
            Swift.withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
        }
        // An empty array has no dimensions, as `array_send` writes it. The NULL flag is written
        // once the elements are known.
        append(isEmpty ? 0 : 1)
        append(0)
        append(Int32(bitPattern: types.element))
        if !isEmpty {
            append(Int32(count))
            append(1)  // lower bound
        }
        var hasNull = false
        for element in self {
            let lengthAt = bytes.count
            append(0)
            let length: Int32
            if element.appendBinaryElement(to: &bytes) {
                let hasNUL = isText && bytes.withUnsafeBufferPointer { all in
                    guard let base = all.baseAddress else { return false }
                    return memchr(base + lengthAt + 4, 0, all.count - lengthAt - 4) != nil
                }
                if hasNUL { return nil }
                length = Int32(bytes.count - lengthAt - 4)
            } else {
                hasNull = true
                length = -1
            }
            Swift.withUnsafeBytes(of: length.bigEndian) { source in
                for index in 0..<4 { bytes[lengthAt + index] = source[index] }
            }
        }
        if hasNull { bytes[7] = 1 }
        return .binaryArray(type: types.array, bytes: bytes)
    }

    /// The text form, `{"a","b",NULL}`.
    @usableFromInline
    func literal() -> String {
        // Built on UTF-8 bytes: per-character String appends are most of the cost of binding
        // large text (signed transactions). `"` and `\` are ASCII and never occur inside a
        // multi-byte UTF-8 sequence, so escaping byte by byte is exact.
        // Elements write their text straight into the literal (no String each: numbers, dates
        // and ids are most of the arrays bound per batch); escaping is only done over the bytes
        // of an element that has a quote or backslash, which only strings can.
        var literal: [UInt8] = [UInt8(ascii: "{")]
        literal.reserveCapacity(2 + count * 28)
        // Through a buffer pointer: this generic code is not specialized for the callers'
        // element types, and `enumerated()` cost more than the elements' own writing.
        withUnsafeBufferPointer { elements in
            for index in 0..<elements.count {
                Self.appendLiteralElement(elements[index], first: index == 0, to: &literal)
            }
        }
        literal.append(UInt8(ascii: "}"))
        return String(decoding: literal, as: UTF8.self)
    }

    private static func appendLiteralElement(_ element: Element, first: Bool, to literal: inout [UInt8]) {
        let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
        if !first { literal.append(UInt8(ascii: ",")) }
        let start = literal.count
        literal.append(quote)
        guard element.appendArrayElementText(to: &literal) else {
            literal.removeLast()
            literal.append(contentsOf: "NULL".utf8)
            return
        }
        if literal[(start + 1)...].contains(where: { $0 == quote || $0 == backslash }) {
            var escaped: [UInt8] = []
            for byte in literal[(start + 1)...] {
                if byte == quote || byte == backslash { escaped.append(backslash) }
                escaped.append(byte)
            }
            literal.replaceSubrange((start + 1)..., with: escaped)
        }
        literal.append(quote)
    }
}

extension Optional: PostgresEncodable where Wrapped: PostgresEncodable {
    public var postgresValue: PostgresValue {
        switch self {
        case .none: .null
        case .some(let value): value.postgresValue
        }
    }
}

/// A value that can stand inside an array parameter.
public protocol PostgresArrayElement: Sendable {
    /// The element's text form; `nil` is SQL NULL.
    var arrayElementText: String? { get }
    /// Appends ``arrayElementText``'s UTF-8 bytes to `bytes`, or nothing and returns false for
    /// SQL NULL. The default goes through ``arrayElementText``; numbers, dates and ids write
    /// their bytes directly.
    func appendArrayElementText(to bytes: inout [UInt8]) -> Bool
    /// The OIDs of the element type and of its array type, for arrays bound in PostgreSQL's
    /// binary format (``PostgresValue/binaryArray(type:bytes:)``); `nil` binds arrays of this
    /// element as a literal.
    static var binaryArrayType: (element: UInt32, array: UInt32)? { get }
    /// Appends the element's binary form (what its type's send function writes), or nothing and
    /// returns false for SQL NULL. Called only when ``binaryArrayType`` is not `nil`.
    func appendBinaryElement(to bytes: inout [UInt8]) -> Bool
}

extension PostgresArrayElement {
    public static var binaryArrayType: (element: UInt32, array: UInt32)? { nil }

    public func appendBinaryElement(to bytes: inout [UInt8]) -> Bool { false }

    public func appendArrayElementText(to bytes: inout [UInt8]) -> Bool {
        guard let text = arrayElementText else { return false }
        bytes.append(contentsOf: text.utf8)
        return true
    }
}

/// Appends the decimal digits of `value` (with a sign) without building a String.
private func appendDecimal(_ value: Int64, to bytes: inout [UInt8]) {
    if value < 0 { bytes.append(UInt8(ascii: "-")) }
    // The magnitude as unsigned, so Int64.min has one too.
    PostgresTimestamp.appendDigits(&bytes, value.magnitude, width: 1)
}

/// Appends `value` big-endian, as PostgreSQL's send functions write integers.
private func appendBigEndian<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
    withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
}

extension String: PostgresArrayElement {
    public var arrayElementText: String? { self }
    public static var binaryArrayType: (element: UInt32, array: UInt32)? { (25, 1009) }  // text
    public func appendBinaryElement(to bytes: inout [UInt8]) -> Bool {
        var text = self
        text.withUTF8 { bytes.append(contentsOf: $0) }
        return true
    }
}
extension Int64: PostgresArrayElement {
    public var arrayElementText: String? { String(self) }
    public static var binaryArrayType: (element: UInt32, array: UInt32)? { (20, 1016) }  // int8
    public func appendBinaryElement(to bytes: inout [UInt8]) -> Bool {
        appendBigEndian(self, to: &bytes)
        return true
    }
    public func appendArrayElementText(to bytes: inout [UInt8]) -> Bool {
        appendDecimal(self, to: &bytes)
        return true
    }
}
extension Int: PostgresArrayElement {
    public var arrayElementText: String? { String(self) }
    /// `int8[]`: a statement that wants `int[]` casts (`$1::int[]`), which the server does
    /// element by element, refusing a value out of its range.
    public static var binaryArrayType: (element: UInt32, array: UInt32)? { (20, 1016) }  // int8
    public func appendBinaryElement(to bytes: inout [UInt8]) -> Bool {
        appendBigEndian(Int64(self), to: &bytes)
        return true
    }
    public func appendArrayElementText(to bytes: inout [UInt8]) -> Bool {
        appendDecimal(Int64(self), to: &bytes)
        return true
    }
}
extension Double: PostgresArrayElement {
    public var arrayElementText: String? {
        if case .text(let text) = postgresValue { return text }
        return nil
    }
    public static var binaryArrayType: (element: UInt32, array: UInt32)? { (701, 1022) }  // float8
    public func appendBinaryElement(to bytes: inout [UInt8]) -> Bool {
        appendBigEndian(bitPattern, to: &bytes)
        return true
    }
}
extension Bool: PostgresArrayElement {
    public var arrayElementText: String? { self ? "t" : "f" }
    public static var binaryArrayType: (element: UInt32, array: UInt32)? { (16, 1000) }  // bool
    public func appendBinaryElement(to bytes: inout [UInt8]) -> Bool {
        bytes.append(self ? 1 : 0)
        return true
    }
}
extension UUID: PostgresArrayElement {
    public var arrayElementText: String? { lowercasedText }
    public static var binaryArrayType: (element: UInt32, array: UInt32)? { (2950, 2951) }  // uuid
    public func appendBinaryElement(to bytes: inout [UInt8]) -> Bool {
        withUnsafeBytes(of: uuid) { bytes.append(contentsOf: $0) }
        return true
    }
    public func appendArrayElementText(to bytes: inout [UInt8]) -> Bool {
        appendLowercasedText(to: &bytes)
        return true
    }
}
extension Date: PostgresArrayElement {
    public var arrayElementText: String? { PostgresTimestamp.format(self) }
    public static var binaryArrayType: (element: UInt32, array: UInt32)? { (1184, 1185) }  // timestamptz
    public func appendBinaryElement(to bytes: inout [UInt8]) -> Bool {
        appendBigEndian(PostgresTimestamp.binary(self), to: &bytes)
        return true
    }
    public func appendArrayElementText(to bytes: inout [UInt8]) -> Bool {
        PostgresTimestamp.append(self, style: .postgres, to: &bytes)
        return true
    }
}
extension Optional: PostgresArrayElement where Wrapped: PostgresArrayElement {
    public var arrayElementText: String? { self?.arrayElementText }
    public static var binaryArrayType: (element: UInt32, array: UInt32)? { Wrapped.binaryArrayType }
    public func appendBinaryElement(to bytes: inout [UInt8]) -> Bool {
        guard let self else { return false }
        return self.appendBinaryElement(to: &bytes)
    }
    public func appendArrayElementText(to bytes: inout [UInt8]) -> Bool {
        guard let self else { return false }
        return self.appendArrayElementText(to: &bytes)
    }
}
