import Foundation
import Postgres
import Testing

/// `PostgresJSONEncoder` against Foundation's `JSONEncoder.postgres`, byte for byte, on the
/// shapes `Codable` can produce: every scalar type, strings that need escaping, sorted and
/// repeated keys, nested and reopened containers, super encoders, and the values Foundation
/// treats specially (dates, data, URLs, decimals, non-finite numbers).
@Suite struct JSONEncoderTests {
    private func expectSame<T: Encodable>(_ value: T, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let expected = String(decoding: try JSONEncoder.postgres.encode(value), as: UTF8.self)
        #expect(try PostgresJSONEncoder.string(value) == expected, sourceLocation: sourceLocation)
    }

    struct Scalars: Encodable {
        var int = Int.min, int8 = Int8.min, int16 = Int16.max, int32 = Int32.min, int64 = Int64.max
        var uint = UInt.max, uint8 = UInt8.max, uint16 = UInt16.max, uint32 = UInt32.max, uint64 = UInt64.max
        var yes = true, no = false
        var double: Double, float: Float
        var optional: String? = nil
        var present: String? = "here"
    }

    @Test func scalarsAndNumbers() throws {
        for double in [0.0, -0.0, 1.0, 0.1, 1.5, -2.25, 1e-7, 1e21, 123_456_789.125, .leastNonzeroMagnitude, .greatestFiniteMagnitude, 1.0 / 3.0] {
            try expectSame(Scalars(double: double, float: Float(double == .greatestFiniteMagnitude ? 3.0 : double)))
            try expectSame([double])
            try expectSame(double)
        }
        try expectSame(Decimal(string: "12.50"))
        try expectSame([Decimal(string: "-0.000001"), Decimal(1_000_000)])
    }

    @Test func nonFiniteNumbersAreRefused() {
        for value in [Double.nan, .infinity, -.infinity] {
            #expect(throws: EncodingError.self) { try PostgresJSONEncoder.encode(Scalars(double: value, float: 0)) }
            #expect(throws: EncodingError.self) { try PostgresJSONEncoder.encode([value]) }
        }
    }

    @Test func stringsAreEscapedAsFoundationDoes() throws {
        var every = ""
        for scalar in 0..<0x80 { every.unicodeScalars.append(Unicode.Scalar(UInt8(scalar))) }
        for text in [every, "a/b\\c\"d", "ünïcödé ✓ 🙂 \u{2028}\u{2029}", "", "\u{7F}\u{0}"] {
            try expectSame(text)
            try expectSame([text: [text]])
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let text = String((0..<Int.random(in: 0...40, using: &generator)).map { _ in
                Character(Unicode.Scalar(UInt32.random(in: 0...0x2FF, using: &generator)) ?? "x")
            })
            try expectSame(["k": text])
        }
    }

    @Test func keysAreSortedByTheirBytes() throws {
        try expectSame(["b": 1, "a": 2, "B": 3, "_": 4, "a_b": 5, "ab": 6, "a1": 7, "a10": 8, "a9": 9, "": 10])
        try expectSame([3: "c", 1: "a", 20: "t"])
        try expectSame([[String: [Int?]]](repeating: ["x": [1, nil, 3], "w": []], count: 2))
    }

    struct Special: Encodable {
        var dates: [Date]
        var data = Data([0, 1, 2, 250, 255])
        var url = URL(string: "https://example.com/a/b?c=d")
    }

    /// The one difference from Foundation: UUIDs in lowercase, wherever they are (a value, an
    /// optional, an array, a dictionary's value).
    struct Ids: Encodable {
        var id = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")
        var ids = [UUID(uuidString: "0A1B2C3D-4E5F-4A6B-8C7D-9E0F1A2B3C4D")]
        var named = ["x": UUID(uuidString: "FFFFFFFF-0000-4000-8000-ABCDEFABCDEF")]
    }

    @Test func uuidsAreLowercase() throws {
        let text = String(decoding: try PostgresJSONEncoder.encode(Ids()), as: UTF8.self)
        #expect(text == #"{"id":"e621e1f8-c36c-495a-93fc-0c247a3e6e5f","ids":["0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"],"named":{"x":"ffffffff-0000-4000-8000-abcdefabcdef"}}"#)
        let foundation = String(decoding: try JSONEncoder.postgres.encode(Ids()), as: UTF8.self)
        #expect(text == foundation.lowercased(), "otherwise the same bytes as Foundation's")
        #expect(try JSONDecoder().decode([String: UUID].self, from: Data(#"{"a":"e621e1f8-c36c-495a-93fc-0c247a3e6e5f"}"#.utf8))["a"] == Ids().id)
    }

    @Test func datesDataAndURLs() throws {
        let dates: [Date] = [
            Date(timeIntervalSince1970: 1_795_000_000.123456), Date(timeIntervalSince1970: 0),
            Date(timeIntervalSince1970: 1_795_000_000.9999996), Date(timeIntervalSinceReferenceDate: -63_200_000_000_000),
            .distantFuture, .distantPast, Date(timeIntervalSince1970: 253_402_300_800.5),
        ]
        try expectSame(Special(dates: dates))
        try expectSame(dates.first)
    }

    /// Hand-written encoders that reopen, nest, and use super encoders.
    struct Unusual: Encodable {
        enum Key: String, CodingKey { case a, b, nested, list, again }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(1, forKey: .a)
            try container.encode(2, forKey: .a)
            var nested = container.nestedContainer(keyedBy: Key.self, forKey: .nested)
            try nested.encode("n", forKey: .b)
            var list = container.nestedUnkeyedContainer(forKey: .list)
            try list.encode(true)
            var inner = list.nestedContainer(keyedBy: Key.self)
            try inner.encodeNil(forKey: .a)
            var deeper = list.nestedUnkeyedContainer()
            try deeper.encode(Empty())
            try list.encode(Date(timeIntervalSince1970: 1))
            try Tagged(tag: "sup").encode(to: container.superEncoder())
            try Tagged(tag: "again").encode(to: container.superEncoder(forKey: .again))
            try Single(value: 5).encode(to: list.superEncoder())
            var reopened = encoder.container(keyedBy: Key.self)
            try reopened.encode("late", forKey: .b)
            try nested.encode("after", forKey: .a)
            try list.encode("after")
        }
    }
    struct Empty: Encodable { func encode(to encoder: any Encoder) throws {} }
    struct Tagged: Encodable { var tag: String }
    struct Single: Encodable {
        var value: Int
        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(value)
        }
    }

    @Test func reopenedNestedAndSuperContainers() throws {
        try expectSame(Unusual())
        try expectSame([Empty()])
        #expect(throws: (any Error).self) { try JSONEncoder.postgres.encode(Empty()) }
        #expect(throws: EncodingError.self) { try PostgresJSONEncoder.encode(Empty()) }
        try expectSame([Single(value: 1), Single(value: 2)])
        try expectSame(["o": Optional<Int>.none])
    }

    /// A value encoded before is written as it is, wherever it stands; other encoders refuse it.
    @Test func encodedJSONIsWrittenAsItIs() throws {
        let value = ["b": [Single(value: 2)], "a/\"": [Single(value: 1)]]
        let encoded = try EncodedJSON(value)
        #expect(encoded.bytes == Array(try JSONEncoder.postgres.encode(value)))
        let outer = ["z": [encoded, encoded], "y": [try EncodedJSON(3.5)]]
        let plain = ["z": [value, value]]
        #expect(
            try PostgresJSONEncoder.string(outer)
                == #"{"y":[3.5],"z":["# + String(decoding: encoded.bytes, as: UTF8.self) + "," + String(decoding: encoded.bytes, as: UTF8.self) + "]}")
        #expect(try PostgresJSONEncoder.encode(["z": [encoded, encoded]]) == Array(try JSONEncoder.postgres.encode(plain)))
        #expect(throws: EncodingError.self) { try JSONEncoder.postgres.encode(outer) }
    }
}
