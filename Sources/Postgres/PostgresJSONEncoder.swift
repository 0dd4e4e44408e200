import Foundation

/// Encodes `Encodable` values as the JSON text that ``JSONEncoder/postgres`` writes (keys sorted by
/// their UTF-8 bytes, slashes unescaped, dates as RFC 3339 with microseconds, `Data` as base64,
/// `URL` as its absolute string), several times faster.
///
/// Resolution encodes every state, aggregate and event it writes as JSON, too hot a path for
/// Foundation's encoder (docs/PERFORMANCE.md, *In the code*): it formats each date through a
/// closure and a nested encoder, and goes through existentials for every value.
/// This encoder builds a small tree of reference boxes (containers can be reopened and nested,
/// as `Encoder` allows) and writes it once into a byte buffer; dates go straight from `Date` to
/// bytes. The tests compare its output with Foundation's, byte for byte, on generated values of
/// every domain type.
///
/// Non-finite floating-point numbers throw `EncodingError.invalidValue`, as Foundation's do.
///
/// One difference, on purpose: a `UUID` is written in lowercase (Foundation writes
/// `uuidString`, uppercase), as PostgreSQL prints a `uuid`, as the `webhook-id` header and the
/// command line write ids, so that an id reads the same in every answer, log and console
/// (docs/API.md, "Ids"). Nothing the domain stores holds a `UUID`; API answers do.
public enum PostgresJSONEncoder {
    /// The JSON text of `value`, as UTF-8 bytes.
    public static func encode(_ value: some Encodable) throws -> [UInt8] {
        if let writable = value as? any JSONWritable { return try JSONWriter.encode(writable) }
        let node = try JSONTreeEncoder(parent: nil, key: nil).node(for: value, topLevel: true)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        node.write(to: &bytes)
        return bytes
    }

    /// Appends `text` as a JSON string (quoted and escaped) to `bytes`.
    public static func appendString(_ text: String, to bytes: inout [UInt8]) {
        JSONNode.writeString(text, to: &bytes)
    }

    /// The JSON text of `value`.
    public static func string(_ value: some Encodable) throws -> String {
        String(decoding: try encode(value), as: UTF8.self)
    }
}

/// JSON text this encoder wrote already, written again as it is wherever it is encoded: a value
/// that several documents embed (an account's state, in its row and in each of its events) is
/// encoded once.
///
/// Only ``PostgresJSONEncoder`` knows it; any other encoder gets `EncodingError.invalidValue`.
public struct EncodedJSON: JSONWritable, Sendable, Hashable {
    /// The JSON text, as ``PostgresJSONEncoder/encode(_:)`` returned it.
    public let bytes: [UInt8]

    /// Wraps the encoding of `value`.
    public init(_ value: some Encodable) throws {
        bytes = try PostgresJSONEncoder.encode(value)
    }

    public func write(to writer: inout JSONWriter) { writer.raw(bytes) }

    public func encode(to encoder: any Encoder) throws {
        throw EncodingError.invalidValue(
            self, EncodingError.Context(codingPath: encoder.codingPath, debugDescription: "EncodedJSON is written by PostgresJSONEncoder only"))
    }
}

/// A JSON value being built. Containers are reference boxes so that a container handed out by
/// an encoder can still be filled after the encoder returned it (and reopened by a later call).
enum JSONNode {
    /// A number, `true`, `false` or `null`: written as it is.
    case literal(String)
    /// JSON text encoded before (``EncodedJSON``): written as it is.
    case raw([UInt8])
    case string(String)
    case date(Date)
    case array(JSONArrayBox)
    case object(JSONObjectBox)
    /// What a `superEncoder()` holds when the value is written (it may be filled at any time
    /// after it was handed out); `{}` if it was never given a value, as Foundation writes it.
    case encoder(JSONTreeEncoder)

    func write(to bytes: inout [UInt8]) {
        switch self {
        case .literal(let text):
            bytes.append(contentsOf: text.utf8)
        case .raw(let text):
            bytes.append(contentsOf: text)
        case .string(let text):
            Self.writeString(text, to: &bytes)
        case .date(let date):
            bytes.append(UInt8(ascii: "\""))
            PostgresTimestamp.append(date, style: .rfc3339, to: &bytes)
            bytes.append(UInt8(ascii: "\""))
        case .array(let box):
            bytes.append(UInt8(ascii: "["))
            for (index, item) in box.items.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                item.write(to: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let box):
            bytes.append(UInt8(ascii: "{"))
            var first = true
            for index in box.sortedUniqueIndices() {
                if !first { bytes.append(UInt8(ascii: ",")) }
                first = false
                Self.writeString(box.keys[index], to: &bytes)
                bytes.append(UInt8(ascii: ":"))
                box.values[index].write(to: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        case .encoder(let encoder):
            (encoder.node ?? .object(JSONObjectBox())).write(to: &bytes)
        }
    }

    /// A JSON string: `"` and `\` escaped, control characters as `\n`, `\t`, ... or `\u00XX`,
    /// everything else (slashes and non-ASCII included) as it is, as Foundation writes them.
    static func writeString(_ text: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        // Most strings (ids, products, times, enum names) need no escape: copied in one piece,
        // not appended byte by byte (docs/PERFORMANCE.md, *In the code*).
        var text = text
        let copied = text.withUTF8 { utf8 in
            guard !utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else { return false }
            bytes.append(contentsOf: utf8)
            return true
        }
        if copied {
            bytes.append(UInt8(ascii: "\""))
            return
        }
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x08: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0C: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0x00..<0x20:
                bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                HexText.append(byte, to: &bytes)
            default:
                bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

final class JSONArrayBox {
    var items: [JSONNode] = []
}

final class JSONObjectBox {
    var keys: [String] = []
    var values: [JSONNode] = []

    /// The indices of `keys` in the order they are written: sorted by UTF-8 bytes; of a key
    /// written twice, the last value (what a dictionary-backed encoder keeps).
    func sortedUniqueIndices() -> [Int] {
        let sorted = keys.indices.sorted { left, right in
            let l = keys[left], r = keys[right]
            if l == r { return left < right }
            return l.utf8.lexicographicallyPrecedes(r.utf8)
        }
        guard sorted.count > 1 else { return sorted }
        var unique: [Int] = []
        unique.reserveCapacity(sorted.count)
        for (position, index) in sorted.enumerated() {
            if position + 1 < sorted.count, keys[sorted[position + 1]] == keys[index] { continue }
            unique.append(index)
        }
        return unique
    }
}
