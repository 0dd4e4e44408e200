import Foundation

/// One bind parameter as it goes to the server.
///
/// Text values are sent with an unspecified type (OID 0) so the server infers the type from
/// the statement, exactly as for a literal; casts in SQL (`$1::uuid`) settle ambiguity.
/// Bytes go in binary format as `bytea`; arrays of strings in binary format as `text[]`.
public enum PostgresValue: Sendable, Hashable {
    case null
    case text(String)
    case bytes([UInt8])
    /// A `text[]` in PostgreSQL's binary array format (`array_recv`): no quoting for the client
    /// to write nor for the server to parse, which for arrays of JSON documents was most of the
    /// cost of binding them. Bind it with a `::text[]` cast (`$1::text[]::uuid[]` for another
    /// element type): the server reads the elements as `text`.
    case textArray([UInt8])
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
    /// Arrays of strings go in binary format (``PostgresValue/textArray(_:)``); other arrays as
    /// a PostgreSQL array literal (`{"a","b",NULL}`). Bind either with a cast such as
    /// `$1::text[]`, which also makes `unnest($1::text[], ...)` batch inserts possible.
    public var postgresValue: PostgresValue {
        if Element.isText, let binary = binaryTextArray() { return binary }
        return .text(literal())
    }

    /// PostgreSQL's binary array format with `text` elements: dimensions, flags, element type,
    /// then each element as a length (-1 for NULL) and its UTF-8 bytes, integers big-endian.
    /// `nil` when an element holds a NUL byte, which `text` cannot: the literal then carries it
    /// to the check that refuses it with a clear error before anything is sent.
    private func binaryTextArray() -> PostgresValue? {
        var size = 20
        for element in self { size += 4 + (element.arrayElementText?.utf8.count ?? 0) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(size)
        func append(_ value: Int32) {
            Swift.withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
        }
        let hasNull = contains { $0.arrayElementText == nil }
        // An empty array has no dimensions, as `array_send` writes it.
        append(isEmpty ? 0 : 1)
        append(hasNull ? 1 : 0)
        append(25)  // text
        if !isEmpty {
            append(Int32(count))
            append(1)  // lower bound
        }
        for element in self {
            guard var text = element.arrayElementText else {
                append(-1)
                continue
            }
            let hasNUL = text.withUTF8 { utf8 -> Bool in
                if let base = utf8.baseAddress, memchr(base, 0, utf8.count) != nil { return true }
                append(Int32(utf8.count))
                bytes.append(contentsOf: utf8)
                return false
            }
            if hasNUL { return nil }
        }
        return .textArray(bytes)
    }

    /// The text form, `{"a","b",NULL}`.
    private func literal() -> String {
        // Built on UTF-8 bytes: per-character String appends were most of the cost of binding
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
    /// Whether the elements are strings, which arrays bind in binary format as `text[]`
    /// (``PostgresValue/textArray(_:)``); other elements go as an array literal.
    static var isText: Bool { get }
}

extension PostgresArrayElement {
    public static var isText: Bool { false }

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

extension String: PostgresArrayElement {
    public var arrayElementText: String? { self }
    public static var isText: Bool { true }
}
extension Int64: PostgresArrayElement {
    public var arrayElementText: String? { String(self) }
    public func appendArrayElementText(to bytes: inout [UInt8]) -> Bool {
        appendDecimal(self, to: &bytes)
        return true
    }
}
extension Int: PostgresArrayElement {
    public var arrayElementText: String? { String(self) }
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
}
extension Bool: PostgresArrayElement {
    public var arrayElementText: String? { self ? "t" : "f" }
}
extension UUID: PostgresArrayElement {
    public var arrayElementText: String? { lowercasedText }
    public func appendArrayElementText(to bytes: inout [UInt8]) -> Bool {
        appendLowercasedText(to: &bytes)
        return true
    }
}
extension Date: PostgresArrayElement {
    public var arrayElementText: String? { PostgresTimestamp.format(self) }
    public func appendArrayElementText(to bytes: inout [UInt8]) -> Bool {
        PostgresTimestamp.append(self, style: .postgres, to: &bytes)
        return true
    }
}
extension Optional: PostgresArrayElement where Wrapped: PostgresArrayElement {
    public var arrayElementText: String? { self?.arrayElementText }
    public static var isText: Bool { Wrapped.isText }
    public func appendArrayElementText(to bytes: inout [UInt8]) -> Bool {
        guard let self else { return false }
        return self.appendArrayElementText(to: &bytes)
    }
}
