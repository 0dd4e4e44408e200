import Foundation

/// The `Encoder` behind ``PostgresJSONEncoder``: one per value being encoded, holding the
/// value's node once a container (or a single value) has been asked for.
final class JSONTreeEncoder: Encoder {
    private let parent: JSONTreeEncoder?
    private let key: (any CodingKey)?
    var node: JSONNode?

    init(parent: JSONTreeEncoder?, key: (any CodingKey)?) {
        self.parent = parent
        self.key = key
    }

    /// Built only when asked for (errors, or types that look at it): keeping it on every
    /// encoder would cost an array per value.
    var codingPath: [any CodingKey] {
        var path: [any CodingKey] = []
        var encoder: JSONTreeEncoder? = self
        while let current = encoder {
            if let key = current.key { path.append(key) }
            encoder = current.parent
        }
        return path.reversed()
    }

    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let box: JSONObjectBox
        if case .object(let existing)? = node {
            box = existing
        } else {
            box = JSONObjectBox()
            node = .object(box)
        }
        return KeyedEncodingContainer(JSONKeyedContainer<Key>(encoder: self, box: box))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let box: JSONArrayBox
        if case .array(let existing)? = node {
            box = existing
        } else {
            box = JSONArrayBox()
            node = .array(box)
        }
        return JSONUnkeyedContainer(encoder: self, box: box)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        JSONSingleValueContainer(encoder: self)
    }

    /// The node of `value`, encoded as a child of this encoder under `key`. Values that
    /// Foundation's `JSONEncoder` treats specially (dates, data, URLs, decimals) are treated
    /// the same way here, and UUIDs are written lowercase (see ``PostgresJSONEncoder``); an encodable that encodes nothing is `{}`, as there, unless it is the
    /// top-level value (`topLevel`), which is refused, as there.
    func node<T: Encodable>(for value: T, key: (any CodingKey)? = nil, topLevel: Bool = false) throws -> JSONNode {
        switch value {
        case let string as String: return .string(string)
        case let int as Int: return .literal(String(int))
        case let int as Int64: return .literal(String(int))
        case let bool as Bool: return .literal(bool ? "true" : "false")
        case let date as Date: return .date(date)
        case let double as Double: return try Self.number(double, key: key, in: self)
        case let data as Data: return .string(data.base64EncodedString())
        case let url as URL: return .string(url.absoluteString)
        case let uuid as UUID: return .string(uuid.lowercasedText)
        case let decimal as Decimal: return .literal(decimal.description)
        case let encoded as EncodedJSON: return .raw(encoded.bytes)
        case let writable as any JSONWritable: return .raw(try JSONWriter.encode(writable))
        default:
            let child = JSONTreeEncoder(parent: self, key: key)
            try value.encode(to: child)
            if let node = child.node { return node }
            guard !topLevel else {
                throw EncodingError.invalidValue(
                    value, EncodingError.Context(codingPath: [], debugDescription: "Top-level \(T.self) did not encode any values."))
            }
            return .object(JSONObjectBox())
        }
    }

    /// Foundation's form of a floating-point number: its shortest description, without a
    /// trailing `.0`; non-finite numbers are refused.
    static func number<F: BinaryFloatingPoint & CustomStringConvertible>(
        _ value: F, key: (any CodingKey)?, in encoder: JSONTreeEncoder
    ) throws -> JSONNode {
        guard value.isFinite else {
            var path = encoder.codingPath
            if let key { path.append(key) }
            throw EncodingError.invalidValue(
                value, EncodingError.Context(codingPath: path, debugDescription: "Unable to encode \(value) directly in JSON."))
        }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        return .literal(text)
    }
}

struct JSONKeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: JSONTreeEncoder
    let box: JSONObjectBox

    var codingPath: [any CodingKey] { encoder.codingPath }

    private func set(_ node: JSONNode, for key: Key) {
        box.keys.append(key.stringValue)
        box.values.append(node)
    }

    mutating func encodeNil(forKey key: Key) throws { set(.literal("null"), for: key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { set(.literal(value ? "true" : "false"), for: key) }
    mutating func encode(_ value: String, forKey key: Key) throws { set(.string(value), for: key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { set(try JSONTreeEncoder.number(value, key: key, in: encoder), for: key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { set(try JSONTreeEncoder.number(value, key: key, in: encoder), for: key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { set(.literal(String(value)), for: key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { set(.literal(String(value)), for: key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { set(.literal(String(value)), for: key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { set(.literal(String(value)), for: key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { set(.literal(String(value)), for: key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { set(.literal(String(value)), for: key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { set(.literal(String(value)), for: key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { set(.literal(String(value)), for: key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { set(.literal(String(value)), for: key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { set(.literal(String(value)), for: key) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { set(try encoder.node(for: value, key: key), for: key) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let child = JSONTreeEncoder(parent: encoder, key: key)
        let container = child.container(keyedBy: keyType)
        if let node = child.node { set(node, for: key) }
        return container
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let child = JSONTreeEncoder(parent: encoder, key: key)
        let container = child.unkeyedContainer()
        if let node = child.node { set(node, for: key) }
        return container
    }

    mutating func superEncoder() -> any Encoder {
        superEncoder(forKey: JSONSuperKey.super, name: "super")
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        superEncoder(forKey: key, name: key.stringValue)
    }

    private func superEncoder(forKey key: any CodingKey, name: String) -> any Encoder {
        let child = JSONTreeEncoder(parent: encoder, key: key)
        box.keys.append(name)
        box.values.append(.encoder(child))
        return child
    }
}

struct JSONUnkeyedContainer: UnkeyedEncodingContainer {
    let encoder: JSONTreeEncoder
    let box: JSONArrayBox

    var codingPath: [any CodingKey] { encoder.codingPath }
    var count: Int { box.items.count }

    private var nextKey: JSONIndexKey { JSONIndexKey(intValue: box.items.count) }

    mutating func encodeNil() throws { box.items.append(.literal("null")) }
    mutating func encode(_ value: Bool) throws { box.items.append(.literal(value ? "true" : "false")) }
    mutating func encode(_ value: String) throws { box.items.append(.string(value)) }
    mutating func encode(_ value: Double) throws { box.items.append(try JSONTreeEncoder.number(value, key: nextKey, in: encoder)) }
    mutating func encode(_ value: Float) throws { box.items.append(try JSONTreeEncoder.number(value, key: nextKey, in: encoder)) }
    mutating func encode(_ value: Int) throws { box.items.append(.literal(String(value))) }
    mutating func encode(_ value: Int8) throws { box.items.append(.literal(String(value))) }
    mutating func encode(_ value: Int16) throws { box.items.append(.literal(String(value))) }
    mutating func encode(_ value: Int32) throws { box.items.append(.literal(String(value))) }
    mutating func encode(_ value: Int64) throws { box.items.append(.literal(String(value))) }
    mutating func encode(_ value: UInt) throws { box.items.append(.literal(String(value))) }
    mutating func encode(_ value: UInt8) throws { box.items.append(.literal(String(value))) }
    mutating func encode(_ value: UInt16) throws { box.items.append(.literal(String(value))) }
    mutating func encode(_ value: UInt32) throws { box.items.append(.literal(String(value))) }
    mutating func encode(_ value: UInt64) throws { box.items.append(.literal(String(value))) }
    mutating func encode<T: Encodable>(_ value: T) throws { box.items.append(try encoder.node(for: value, key: nextKey)) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let child = JSONTreeEncoder(parent: encoder, key: nextKey)
        let container = child.container(keyedBy: keyType)
        if let node = child.node { box.items.append(node) }
        return container
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let child = JSONTreeEncoder(parent: encoder, key: nextKey)
        let container = child.unkeyedContainer()
        if let node = child.node { box.items.append(node) }
        return container
    }

    mutating func superEncoder() -> any Encoder {
        let child = JSONTreeEncoder(parent: encoder, key: nextKey)
        box.items.append(.encoder(child))
        return child
    }
}

struct JSONSingleValueContainer: SingleValueEncodingContainer {
    let encoder: JSONTreeEncoder

    var codingPath: [any CodingKey] { encoder.codingPath }

    mutating func encodeNil() throws { encoder.node = .literal("null") }
    mutating func encode(_ value: Bool) throws { encoder.node = .literal(value ? "true" : "false") }
    mutating func encode(_ value: String) throws { encoder.node = .string(value) }
    mutating func encode(_ value: Double) throws { encoder.node = try JSONTreeEncoder.number(value, key: nil, in: encoder) }
    mutating func encode(_ value: Float) throws { encoder.node = try JSONTreeEncoder.number(value, key: nil, in: encoder) }
    mutating func encode(_ value: Int) throws { encoder.node = .literal(String(value)) }
    mutating func encode(_ value: Int8) throws { encoder.node = .literal(String(value)) }
    mutating func encode(_ value: Int16) throws { encoder.node = .literal(String(value)) }
    mutating func encode(_ value: Int32) throws { encoder.node = .literal(String(value)) }
    mutating func encode(_ value: Int64) throws { encoder.node = .literal(String(value)) }
    mutating func encode(_ value: UInt) throws { encoder.node = .literal(String(value)) }
    mutating func encode(_ value: UInt8) throws { encoder.node = .literal(String(value)) }
    mutating func encode(_ value: UInt16) throws { encoder.node = .literal(String(value)) }
    mutating func encode(_ value: UInt32) throws { encoder.node = .literal(String(value)) }
    mutating func encode(_ value: UInt64) throws { encoder.node = .literal(String(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        // Encoded in place: the child carries no key of its own.
        encoder.node = try encoder.node(for: value)
    }
}

/// The key of an array element in a coding path.
struct JSONIndexKey: CodingKey {
    var stringValue: String { "Index \(intValue ?? 0)" }
    var intValue: Int?
    init(intValue: Int) { self.intValue = intValue }
    init?(stringValue: String) { nil }
}

/// The key `superEncoder()` uses.
enum JSONSuperKey: String, CodingKey {
    case `super`
}
