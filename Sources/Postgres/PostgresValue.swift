import Foundation

/// One bind parameter as it goes to the server.
///
/// Text values are sent with an unspecified type (OID 0) so the server infers the type from
/// the statement, exactly as for a literal; casts in SQL (`$1::uuid`) settle ambiguity.
/// Bytes go in binary format as `bytea`.
public enum PostgresValue: Sendable, Hashable {
    case null
    case text(String)
    case bytes([UInt8])
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
    public var postgresValue: PostgresValue { .text(uuidString.lowercased()) }
}

extension Date: PostgresEncodable {
    public var postgresValue: PostgresValue { .text(PostgresTimestamp.format(self)) }
}

extension Data: PostgresEncodable {
    public var postgresValue: PostgresValue { .bytes([UInt8](self)) }
}

extension Array: PostgresEncodable where Element: PostgresArrayElement {
    /// Encodes as a PostgreSQL array literal (`{"a","b",NULL}`); bind it with a cast such as
    /// `$1::text[]`, which also makes `unnest($1::text[], ...)` batch inserts possible.
    public var postgresValue: PostgresValue {
        // Built on UTF-8 bytes: per-character String appends were most of the cost of binding
        // large text (signed transactions). `"` and `\` are ASCII and never occur inside a
        // multi-byte UTF-8 sequence, so escaping byte by byte is exact.
        let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
        var literal: [UInt8] = [UInt8(ascii: "{")]
        for (index, element) in self.enumerated() {
            if index > 0 { literal.append(UInt8(ascii: ",")) }
            switch element.arrayElementText {
            case nil:
                literal.append(contentsOf: "NULL".utf8)
            case let text?:
                literal.append(quote)
                for byte in text.utf8 {
                    if byte == quote || byte == backslash { literal.append(backslash) }
                    literal.append(byte)
                }
                literal.append(quote)
            }
        }
        literal.append(UInt8(ascii: "}"))
        return .text(String(decoding: literal, as: UTF8.self))
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
}

extension String: PostgresArrayElement {
    public var arrayElementText: String? { self }
}
extension Int64: PostgresArrayElement {
    public var arrayElementText: String? { String(self) }
}
extension Int: PostgresArrayElement {
    public var arrayElementText: String? { String(self) }
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
    public var arrayElementText: String? { uuidString.lowercased() }
}
extension Date: PostgresArrayElement {
    public var arrayElementText: String? { PostgresTimestamp.format(self) }
}
extension Optional: PostgresArrayElement where Wrapped: PostgresArrayElement {
    public var arrayElementText: String? { self?.arrayElementText }
}
