import Foundation

/// A value that writes its own JSON text: exactly the bytes ``PostgresJSONEncoder`` writes for
/// its `Encodable` conformance, without the tree of boxes and existential containers that the
/// generic encoder builds.
///
/// Resolution writes an account state, its entitlements, its transaction aggregates and its
/// events as JSON for every batch: too hot a path for the generic encoder (docs/PERFORMANCE.md,
/// *In the code*). The hot domain types conform (in SyncStore), and ``PostgresJSONEncoder`` uses
/// the conformance wherever such a value is encoded, on its own or inside another value. A
/// conformance must write its keys sorted by their UTF-8 bytes and nulls where its `encode(to:)`
/// writes them; `JSONWritableTests` compares each writer with Foundation's
/// `JSONEncoder.postgres` on generated values of its type.
public protocol JSONWritable: Encodable {
    func write(to writer: inout JSONWriter) throws
}

/// Appends JSON text to a byte buffer, one value at a time. Object members are written with
/// ``key(_:)`` followed by one value; the writer puts the commas in.
public struct JSONWriter {
    public private(set) var bytes: [UInt8]
    /// Whether the value about to be written follows another in the same object or array.
    private var needsComma = false

    public init(capacity: Int = 512) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// The JSON text of `value`.
    public static func encode(_ value: some JSONWritable) throws -> [UInt8] {
        var writer = JSONWriter()
        try value.write(to: &writer)
        return writer.bytes
    }

    /// An object: `body` writes its members, keys in ascending UTF-8 order.
    public mutating func object(_ body: (inout JSONWriter) throws -> Void) rethrows {
        bytes.append(UInt8(ascii: "{"))
        let outer = needsComma
        needsComma = false
        try body(&self)
        needsComma = outer
        bytes.append(UInt8(ascii: "}"))
    }

    /// An array of `items`, each written by `element`.
    public mutating func array<S: Sequence>(_ items: S, _ element: (inout JSONWriter, S.Element) throws -> Void) rethrows {
        bytes.append(UInt8(ascii: "["))
        let outer = needsComma
        needsComma = false
        for item in items {
            if needsComma { bytes.append(UInt8(ascii: ",")) }
            try element(&self, item)
            needsComma = true
        }
        needsComma = outer
        bytes.append(UInt8(ascii: "]"))
    }

    /// The name of the next object member. Keys are the type's own coding keys: plain ASCII,
    /// written without escaping.
    public mutating func key(_ name: StaticString) {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        needsComma = true
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    /// The name of the next object member when it is data (a dictionary's key): escaped.
    public mutating func key(escaping name: String) {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        needsComma = true
        JSONNode.writeString(name, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    public mutating func string(_ value: String) { JSONNode.writeString(value, to: &bytes) }
    public mutating func bool(_ value: Bool) { bytes.append(contentsOf: value ? Self.trueText : Self.falseText) }
    public mutating func int<I: BinaryInteger>(_ value: I) { bytes.append(contentsOf: String(value).utf8) }
    public mutating func null() { bytes.append(contentsOf: Self.nullText) }

    /// A date as ``PostgresJSONEncoder`` writes it: RFC 3339 with microseconds.
    public mutating func date(_ value: Date) {
        bytes.append(UInt8(ascii: "\""))
        PostgresTimestamp.append(value, style: .rfc3339, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    public mutating func string(_ value: String?) { if let value { string(value) } else { null() } }
    public mutating func bool(_ value: Bool?) { if let value { bool(value) } else { null() } }
    public mutating func date(_ value: Date?) { if let value { date(value) } else { null() } }

    /// JSON text written before, as it is.
    public mutating func raw(_ text: [UInt8]) { bytes.append(contentsOf: text) }

    /// Any other value, through ``PostgresJSONEncoder`` (its own writer if it has one).
    public mutating func value(_ value: some Encodable) throws {
        if let writable = value as? any JSONWritable {
            try writable.write(to: &self)
        } else {
            // As a member, not a document: a value that encodes nothing is `{}`, as there.
            try JSONTreeEncoder(parent: nil, key: nil).node(for: value).write(to: &bytes)
        }
    }

    /// A value, or `null`.
    public mutating func optional(_ value: (some JSONWritable)?) throws {
        if let value { try value.write(to: &self) } else { null() }
    }

    private static let trueText = Array("true".utf8)
    private static let falseText = Array("false".utf8)
    private static let nullText = Array("null".utf8)
}
