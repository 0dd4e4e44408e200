import Foundation

/// A Swift type that can be read from a result cell in PostgreSQL's text format.
public protocol PostgresDecodable {
    /// Decodes the cell's text bytes.
    static func decode(text: UnsafeBufferPointer<UInt8>) throws -> Self
    /// The value for SQL NULL; non-optional types throw.
    static func decodeNull(column: String) throws -> Self
}

extension PostgresDecodable {
    public static func decodeNull(column: String) throws -> Self {
        throw PostgresError(.decoding, message: "column \"\(column)\" is NULL but \(Self.self) is not optional")
    }

    /// The cell's text is data (it may be personal), so it goes into `detail`, which only
    /// `debugDescription` shows, not into the message.
    static func failure(_ bytes: UnsafeBufferPointer<UInt8>) -> PostgresError {
        let preview = String(decoding: bytes.prefix(40), as: UTF8.self)
        return PostgresError(
            .decoding,
            message: "cannot read \(Self.self) from a \(bytes.count)-byte value",
            detail: "value starts with \"\(preview)\""
        )
    }
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    public static func decode(text: UnsafeBufferPointer<UInt8>) throws -> Self {
        try Wrapped.decode(text: text)
    }

    public static func decodeNull(column: String) throws -> Self { nil }
}

extension String: PostgresDecodable {
    public static func decode(text: UnsafeBufferPointer<UInt8>) throws -> String {
        String(decoding: text, as: UTF8.self)
    }
}

extension Int64: PostgresDecodable {
    public static func decode(text: UnsafeBufferPointer<UInt8>) throws -> Int64 {
        var value: Int64 = 0
        var negative = false
        var sawDigit = false
        for (offset, byte) in text.enumerated() {
            if offset == 0, byte == UInt8(ascii: "-") {
                negative = true
                continue
            }
            guard byte >= 0x30, byte <= 0x39 else { throw failure(text) }
            let digit = Int64(byte - 0x30)
            let (shifted, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (next, overflow2) = negative ? shifted.subtractingReportingOverflow(digit) : shifted.addingReportingOverflow(digit)
            guard !overflow1, !overflow2 else { throw failure(text) }
            value = next
            sawDigit = true
        }
        guard sawDigit else { throw failure(text) }
        return value
    }
}

extension Int: PostgresDecodable {
    public static func decode(text: UnsafeBufferPointer<UInt8>) throws -> Int {
        Int(try Int64.decode(text: text))
    }
}

extension Int32: PostgresDecodable {
    public static func decode(text: UnsafeBufferPointer<UInt8>) throws -> Int32 {
        guard let value = Int32(exactly: try Int64.decode(text: text)) else { throw failure(text) }
        return value
    }
}

extension Bool: PostgresDecodable {
    public static func decode(text: UnsafeBufferPointer<UInt8>) throws -> Bool {
        guard text.count == 1 else { throw failure(text) }
        switch text[0] {
        case UInt8(ascii: "t"): return true
        case UInt8(ascii: "f"): return false
        default: throw failure(text)
        }
    }
}

extension Double: PostgresDecodable {
    public static func decode(text: UnsafeBufferPointer<UInt8>) throws -> Double {
        guard let value = Double(String(decoding: text, as: UTF8.self)) else { throw failure(text) }
        return value
    }
}

extension UUID: PostgresDecodable {
    public static func decode(text: UnsafeBufferPointer<UInt8>) throws -> UUID {
        guard let value = UUID(hyphenatedText: text) else { throw failure(text) }
        return value
    }
}

extension Date: PostgresDecodable {
    public static func decode(text: UnsafeBufferPointer<UInt8>) throws -> Date {
        guard let value = PostgresTimestamp.parse(text) else { throw failure(text) }
        return value
    }
}

/// `bytea` in the server's hex output format (`\x0a1b...`).
extension Data: PostgresDecodable {
    public static func decode(text: UnsafeBufferPointer<UInt8>) throws -> Data {
        guard text.count >= 2, text[0] == UInt8(ascii: "\\"), text[1] == UInt8(ascii: "x"), text.count % 2 == 0 else {
            throw failure(text)
        }
        var data = Data(capacity: (text.count - 2) / 2)
        var index = 2
        while index < text.count {
            guard let high = HexText.value(of: text[index]), let low = HexText.value(of: text[index + 1]) else { throw failure(text) }
            data.append(high << 4 | low)
            index += 2
        }
        return data
    }
}

/// A `json` or `jsonb` column decoded into a `Decodable` type.
public struct JSONColumn<Value: Decodable>: PostgresDecodable {
    public var value: Value

    public static func decode(text: UnsafeBufferPointer<UInt8>) throws -> JSONColumn<Value> {
        // A type that reads itself (``JSONReadable``); `JSONDecoder` for any text it refuses.
        if let readable = Value.self as? any JSONReadable.Type,
            let value = (try? JSONReader.read(readable, from: text)) as? Value {
            return JSONColumn(value: value)
        }
        do {
            return JSONColumn(value: try JSONDecoder.postgres.decode(Value.self, from: Data(text)))
        } catch {
            throw PostgresError(.decoding, message: "invalid JSON for \(Value.self): \(error)")
        }
    }
}

/// An `Encodable` value bound as JSON text; cast it in SQL (`$1::jsonb`).
///
/// Encoding happens in the initializer, which throws, so a value that cannot be encoded fails
/// where it is built instead of reaching the database as something else.
public struct JSONParameter: PostgresEncodable {
    public let text: String

    public init(_ value: some Encodable) throws {
        text = try PostgresJSONEncoder.string(value)
    }

    public var postgresValue: PostgresValue { .text(text) }
}

extension JSONDecoder {
    /// Decodes what ``JSONEncoder/postgres`` writes: ISO-8601 dates with fractional seconds.
    public static var postgres: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = PostgresTimestamp.parse(Array(text.utf8)) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "invalid date \(text)")
            }
            return date
        }
        return decoder
    }
}

extension JSONEncoder {
    /// Encodes dates as RFC 3339 with microseconds, stable key order.
    public static var postgres: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(RFC3339.format(date))
        }
        return encoder
    }
}

/// RFC 3339 text for dates (`2026-11-21T02:23:17.123456Z`), used in JSON.
public enum RFC3339 {
    public static func format(_ date: Date) -> String {
        PostgresTimestamp.format(date, style: .rfc3339)
    }

    /// Appends the text of ``format(_:)`` to `bytes`.
    public static func append(_ date: Date, to bytes: inout [UInt8]) {
        PostgresTimestamp.append(date, style: .rfc3339, to: &bytes)
    }

    public static func parse(_ text: String) -> Date? {
        PostgresTimestamp.parse(Array(text.utf8))
    }
}
