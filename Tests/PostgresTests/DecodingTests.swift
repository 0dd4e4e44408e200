import Foundation
import Postgres
import TestSupport
import Testing

/// Values bound from Swift and decoded back come out exactly as they went in, and agree with
/// what the server itself thinks they are.
@Suite struct DecodingTests {
    @Test("a UUID's text, written and parsed without Foundation's printf and scanf, agrees with Foundation's and the server's")
    func uuidText() async throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let uuid = UUID()
            #expect(uuid.lowercasedText == uuid.uuidString.lowercased())
            for text in [uuid.lowercasedText, uuid.uuidString] {
                let parsed = Array(text.utf8).withUnsafeBufferPointer { UUID(hyphenatedText: $0) }
                #expect(parsed == uuid)
            }
            // One byte changed to something that is not part of the form: refused.
            var bytes = Array(uuid.lowercasedText.utf8)
            let position = Int.random(in: 0..<bytes.count, using: &generator)
            bytes[position] = bytes[position] == UInt8(ascii: "-") ? UInt8(ascii: "0") : UInt8(ascii: "g")
            #expect(bytes.withUnsafeBufferPointer { UUID(hyphenatedText: $0) } == nil)
        }
        for text in ["", "0", String(repeating: "0", count: 36), "00000000-0000-0000-0000-00000000000", "00000000-0000-0000-0000-0000000000000"] {
            #expect(Array(text.utf8).withUnsafeBufferPointer { UUID(hyphenatedText: $0) } == nil, "\(text)")
        }
        try await TestDatabase.withConnection { connection in
            let uuids = (0..<20).map { _ in UUID() }
            let rows = try await connection.query("SELECT u, u::text FROM unnest(\(uuids)::uuid[]) AS u")
            #expect(try rows.map { try $0.decode(UUID.self, at: 0) } == uuids)
            #expect(try rows.map { try $0.decode(String.self, at: 1) } == uuids.map(\.lowercasedText))
            let one = try await connection.query("SELECT \(uuids[0])::uuid = \(uuids[0].uuidString)::uuid")
            #expect(try one[0].decode(Bool.self, at: 0))
        }
    }

    @Test func integersAtTheirLimits() async throws {
        try await TestDatabase.withConnection { connection in
            for value in [Int64.min, Int64.min + 1, -1, 0, 1, Int64.max - 1, Int64.max] {
                let rows = try await connection.query("SELECT \(value)::bigint, (\(value)::bigint)::text")
                #expect(try rows[0].decode(Int64.self, at: 0) == value)
                #expect(try rows[0].decode(String.self, at: 1) == String(value))
            }
            for value in [Int32.min, -1, 0, Int32.max] {
                let rows = try await connection.query("SELECT \(value)::int")
                #expect(try rows[0].decode(Int32.self, at: 0) == value)
            }
            let literals = try await connection.query("SELECT 9223372036854775807::bigint, (-9223372036854775808)::bigint, 2147483648::bigint")
            #expect(try literals[0].decode(Int64.self, at: 0) == .max)
            #expect(try literals[0].decode(Int64.self, at: 1) == .min)
            let tooBig = await thrownError { _ = try literals[0].decode(Int32.self, at: 2) }
            #expect((tooBig as? PostgresError)?.kind == .decoding)
            // Binding a value outside the column type is the server's range error.
            let overflow = await thrownError { try await connection.query("SELECT \(Int64.max)::int") }
            #expect((overflow as? PostgresError)?.sqlState == .numericValueOutOfRange)
        }
    }

    @Test func booleans() async throws {
        try await TestDatabase.withConnection { connection in
            let rows = try await connection.query("SELECT \(true)::bool, \(false)::bool, \(true)::bool AND \(false)::bool")
            #expect(try rows[0].decode(Bool.self, at: 0) == true)
            #expect(try rows[0].decode(Bool.self, at: 1) == false)
            #expect(try rows[0].decode(Bool.self, at: 2) == false)
        }
    }

    @Test func doublesRoundTripBitForBit() async throws {
        var generator = SeededGenerator(seed: 0xD0B1E)
        var values: [Double] = [
            0, -0.0, 1, -1, 0.1, 1.0 / 3.0, .pi, 1e-300, -1e-300, .leastNonzeroMagnitude, .leastNormalMagnitude,
            .greatestFiniteMagnitude, -.greatestFiniteMagnitude, 1e308, 123_456_789.123_456_789, .infinity, -.infinity,
        ]
        for _ in 0..<500 {
            let candidate = Double(bitPattern: generator.next())
            if !candidate.isNaN { values.append(candidate) }
        }
        try await TestDatabase.withConnection { connection in
            for value in values {
                let rows = try await connection.query("SELECT \(value)::float8")
                let back = try rows[0].decode(Double.self, at: 0)
                #expect(back.bitPattern == value.bitPattern, "\(value) came back as \(back)")
            }
            let nan = try await connection.query("SELECT \(Double.nan)::float8, 'NaN'::float8")
            #expect(try nan[0].decode(Double.self, at: 0).isNaN)
            #expect(try nan[0].decode(Double.self, at: 1).isNaN)
        }
    }

    /// Microseconds since 1970 from the server's own `extract(epoch ...)` (numeric text).
    static func micros(fromEpochText text: String) throws -> Int64 {
        var digits = Substring(text)
        let negative = digits.hasPrefix("-")
        if negative { digits = digits.dropFirst() }
        let parts = digits.split(separator: ".", omittingEmptySubsequences: false)
        let whole = try #require(Int64(parts[0]))
        var fraction = parts.count > 1 ? String(parts[1]) : ""
        fraction = String((fraction + "000000").prefix(6))
        let micros = whole * 1_000_000 + (try #require(Int64(fraction)))
        return negative ? -micros : micros
    }

    /// Microseconds since 1970 of a date, computed from what `Date` stores (seconds since 2001).
    static func micros(of date: Date) -> Int64 {
        Int64((date.timeIntervalSinceReferenceDate * 1_000_000).rounded()) + 978_307_200_000_000
    }

    /// The date nearest to a count of microseconds since 1970.
    static func date(micros: Int64) -> Date {
        Date(timeIntervalSinceReferenceDate: Double(micros - 978_307_200_000_000) / 1_000_000)
    }

    @Test func datesKeepMicrosecondsAndAgreeWithTheServer() async throws {
        var generator = SeededGenerator(seed: 0xDA7E)
        // Within about a century of 2001 a Double tells every microsecond apart.
        var micros: [Int64] = [0, 1, -1, 999_999, -999_999, 1_000_000, 1_700_000_000_123_456, -946_771_200_000_001, 951_782_400_000_001]
        for _ in 0..<500 {
            micros.append(Int64.random(in: -946_771_200_000_000...2_840_140_800_000_000, using: &generator))  // 1940...2060
        }
        try await TestDatabase.withConnection { connection in
            for value in micros {
                let date = Self.date(micros: value)
                let rows = try await connection.query(
                    "SELECT \(date)::timestamptz, extract(epoch FROM \(date)::timestamptz)::text, \(date)::timestamptz::text"
                )
                let serverMicros = try Self.micros(fromEpochText: try rows[0].decode(String.self, at: 1))
                let serverText = try rows[0].decode(String.self, at: 2)
                #expect(serverMicros == value, "sent \(value), server read \(serverMicros) (\(serverText))")
                let back = try rows[0].decode(Date.self, at: 0)
                #expect(Self.micros(of: back) == value, "sent \(value), decoded \(Self.micros(of: back))")
            }
        }
    }

    @Test(arguments: [
        "0001-01-01 00:00:00+00",
        "0044-03-15 12:00:00+00 BC",
        "1000-06-15 12:34:56.5+00",
        "1582-10-15 00:00:00+00",
        "1600-02-29 23:59:59.999999+00",
        "1969-12-31 23:59:59.999999+00",
        "2300-01-01 00:00:00+00",
        "3000-01-01 00:00:00+00",
        "9999-12-31 23:59:59+00",
        "12345-06-07 08:09:10+00",
    ])
    func farPastAndFutureDatesAgreeWithTheServer(literal: String) async throws {
        try await TestDatabase.withConnection { connection in
            // The server parses the literal; we decode its output, send it back, and the server
            // must see the same instant (to the millisecond: a Double holds no more that far out).
            let fromServer = try await connection.query("SELECT \(literal)::timestamptz, extract(epoch FROM \(literal)::timestamptz)::text")
            let date = try fromServer[0].decode(Date.self, at: 0)
            let expected = try Self.micros(fromEpochText: try fromServer[0].decode(String.self, at: 1))
            #expect(abs(Self.micros(of: date) - expected) < 1000, "\(literal) decoded as \(date)")
            let echoed = try await connection.query(
                "SELECT extract(epoch FROM \(date)::timestamptz)::text, \(date)::timestamptz"
            )
            let echoedMicros = try Self.micros(fromEpochText: try echoed[0].decode(String.self, at: 0))
            #expect(abs(echoedMicros - expected) < 1000, "\(literal) went back as \(echoedMicros), expected \(expected)")
            #expect(abs(Self.micros(of: try echoed[0].decode(Date.self, at: 1)) - expected) < 1000)
        }
    }

    @Test func infinityMapsToDistantFutureAndPast() async throws {
        try await TestDatabase.withConnection { connection in
            let rows = try await connection.query(
                "SELECT 'infinity'::timestamptz, '-infinity'::timestamptz, \(Date.distantFuture)::timestamptz = 'infinity', \(Date.distantPast)::timestamptz = '-infinity'"
            )
            #expect(try rows[0].decode(Date.self, at: 0) == .distantFuture)
            #expect(try rows[0].decode(Date.self, at: 1) == .distantPast)
            #expect(try rows[0].decode(Bool.self, at: 2))
            #expect(try rows[0].decode(Bool.self, at: 3))
        }
    }

    @Test func uuids() async throws {
        var generator = SeededGenerator(seed: 0x0000_0ADD)
        try await TestDatabase.withConnection { connection in
            for _ in 0..<50 {
                var bytes = [UInt8](repeating: 0, count: 16)
                for index in bytes.indices { bytes[index] = UInt8.random(in: 0...255, using: &generator) }
                let uuid = UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                                       bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
                let rows = try await connection.query("SELECT \(uuid)::uuid, \(uuid)::uuid::text")
                #expect(try rows[0].decode(UUID.self, at: 0) == uuid)
                #expect(try rows[0].decode(String.self, at: 1) == uuid.uuidString.lowercased())
            }
            let generated = try await connection.query("SELECT gen_random_uuid()")
            let uuid = try generated[0].decode(UUID.self, at: 0)
            let same = try await connection.query("SELECT \(uuid)::uuid = \(uuid.uuidString.uppercased())::uuid")
            #expect(try same[0].decode(Bool.self, at: 0))
        }
    }

    struct Payload: Codable, Equatable, Sendable {
        var name: String
        var tags: [String]
        var count: Int
        var at: Date
        var nested: [String: Double]
        var missing: String?
    }

    @Test func jsonColumns() async throws {
        let payload = Payload(
            name: "ünïcödé \"quoted\" \\ 😀", tags: ["a", "", "b,c"], count: -42,
            at: Date(timeIntervalSince1970: 1_700_000_000.123_456), nested: ["x": 1.5, "y": -0.25], missing: nil
        )
        try await TestDatabase.withConnection { connection in
            let rows = try await connection.query("SELECT \(try JSONParameter(payload))::jsonb, \(try JSONParameter(payload))::json")
            #expect(try rows[0].decode(JSONColumn<Payload>.self, at: 0).value == payload)
            #expect(try rows[0].decode(JSONColumn<Payload>.self, at: 1).value == payload)
            let built = try await connection.query(
                "SELECT jsonb_build_object('name', 'n', 'tags', ARRAY['t'], 'count', 3, 'at', '2026-01-02T03:04:05.678901Z', 'nested', '{}'::jsonb)"
            )
            let decoded = try built[0].decode(JSONColumn<Payload>.self, at: 0).value
            #expect(decoded.count == 3 && decoded.tags == ["t"])
            #expect(Self.micros(of: decoded.at) == 1_767_323_045_678_901)
            let invalid = await thrownError { _ = try built[0].decode(JSONColumn<[Int]>.self, at: 0) }
            #expect((invalid as? PostgresError)?.kind == .decoding)
        }
    }

    @Test func byteaCarriesEveryByteValue() async throws {
        try await TestDatabase.withConnection { connection in
            let table = TestDatabase.uniqueName("pgt_bytes")
            try await connection.execute(script: "CREATE TEMP TABLE \(table) (id int, value bytea)")
            let all = Data((0...255).map { UInt8($0) })
            let samples: [Data] = [Data(), all, Data(all.reversed()), Data(repeating: 0, count: 10), Data(repeating: 0xFF, count: 100_000)]
            for (index, sample) in samples.enumerated() {
                try await connection.query("INSERT INTO \(unescaped: table) VALUES (\(index), \(sample))")
            }
            let rows = try await connection.query("SELECT id, value, length(value), md5(value) FROM \(unescaped: table) ORDER BY id")
            #expect(rows.count == samples.count)
            for row in rows {
                let sample = samples[try row.decode(Int.self, at: 0)]
                #expect(try row.decode(Data.self, at: 1) == sample)
                #expect(try row.decode(Int.self, at: 2) == sample.count)
            }
            // The server sees the same bytes: byte 0 is 0x00, byte 255 is 0xFF.
            let probe = try await connection.query("SELECT get_byte(\(all)::bytea, 0), get_byte(\(all)::bytea, 255), \(all)::bytea = decode(\(all.map { String(format: "%02x", $0) }.joined()), 'hex')")
            #expect(try probe[0].decode(Int.self, at: 0) == 0)
            #expect(try probe[0].decode(Int.self, at: 1) == 255)
            #expect(try probe[0].decode(Bool.self, at: 2))
            let nullBytes = try await connection.query("SELECT NULL::bytea")
            #expect(try nullBytes[0].decode(Data?.self, at: 0) == nil)
        }
    }

    @Test func textArraysThroughUnnest() async throws {
        var generator = SeededGenerator(seed: 0xA11A)
        let fixed: [String?] = ["a", nil, "NULL", "", " padded ", "\"quoted\"", "back\\slash", "{braces}", "a,b", "'single'", "😀", "\\\"", nil]
        var cases: [[String?]] = [[], [nil], fixed]
        for _ in 0..<100 {
            let length = Int.random(in: 0...8, using: &generator)
            cases.append((0..<length).map { _ in
                Int.random(in: 0..<6, using: &generator) == 0 ? nil : ParameterTests.randomText(using: &generator)
            })
        }
        try await TestDatabase.withConnection { connection in
            for (index, values) in cases.enumerated() {
                let rows = try await connection.query(
                    "SELECT value FROM unnest(\(values)::text[]) WITH ORDINALITY AS t(value, position) ORDER BY position"
                )
                let back = try rows.map { try $0.decode(String?.self, at: 0) }
                #expect(back.map { $0.map { Array($0.unicodeScalars) } } == values.map { $0.map { Array($0.unicodeScalars) } }, "case \(index)")
            }
            // Other element types.
            let numbers: [Int64] = [.min, -1, 0, .max]
            let ints = try await connection.query("SELECT x FROM unnest(\(numbers)::bigint[]) WITH ORDINALITY AS t(x, n) ORDER BY n")
            #expect(try ints.map { try $0.decode(Int64.self, at: 0) } == numbers)
            let uuids = [UUID(), UUID()]
            let ids = try await connection.query("SELECT x FROM unnest(\(uuids)::uuid[]) WITH ORDINALITY AS t(x, n) ORDER BY n")
            #expect(try ids.map { try $0.decode(UUID.self, at: 0) } == uuids)
            let dates = [Date(timeIntervalSince1970: 1.5), Date(timeIntervalSince1970: -86_400.25)]
            let times = try await connection.query("SELECT x FROM unnest(\(dates)::timestamptz[]) WITH ORDINALITY AS t(x, n) ORDER BY n")
            #expect(try times.map { try $0.decode(Date.self, at: 0) } == dates)
            let flags: [Bool?] = [true, nil, false]
            let bools = try await connection.query("SELECT x FROM unnest(\(flags)::bool[]) WITH ORDINALITY AS t(x, n) ORDER BY n")
            #expect(try bools.map { try $0.decode(Bool?.self, at: 0) } == flags)
        }
    }

    /// Numbers, ids and dates write their array-literal text as bytes; it must be exactly the
    /// text they have as strings (which the round trips above check against the server).
    @Test func arrayElementsWriteTheirOwnText() async throws {
        func written<T: PostgresArrayElement>(_ value: T) -> String? {
            var bytes: [UInt8] = Array("x".utf8)
            guard value.appendArrayElementText(to: &bytes) else { return bytes == Array("x".utf8) ? nil : "appended for NULL" }
            return String(decoding: bytes.dropFirst(), as: UTF8.self)
        }
        var generator = SystemRandomNumberGenerator()
        let edges: [Int64] = [.min, .min + 1, -10, -9, -1, 0, 1, 9, 10, 99, 100, .max - 1, .max]
        for value in edges + (0..<1000).map({ _ in Int64.random(in: .min ... .max, using: &generator) }) {
            #expect(written(value) == value.arrayElementText)
            #expect(written(Int(truncatingIfNeeded: value)) == Int(truncatingIfNeeded: value).arrayElementText)
        }
        for _ in 0..<200 {
            let id = UUID()
            #expect(written(id) == id.arrayElementText)
        }
        let dateEdges = [Date.distantPast, .distantFuture, Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: -62_135_596_800.5)]
        let randomDates = (0..<1000).map { _ in Date(timeIntervalSince1970: Double.random(in: -70_000_000_000...300_000_000_000, using: &generator)) }
        for date in dateEdges + randomDates {
            #expect(written(date) == date.arrayElementText)
        }
        #expect(written(Int64?.none) == nil)
        #expect(written(Date?.some(Date(timeIntervalSince1970: 1.5))) == Date(timeIntervalSince1970: 1.5).arrayElementText)
        try await TestDatabase.withConnection { connection in
            // NULLs between values, and values beside them, through the literal.
            let values: [Int64?] = [nil, .min, nil, 42, nil]
            let rows = try await connection.query("SELECT x FROM unnest(\(values)::bigint[]) WITH ORDINALITY AS t(x, n) ORDER BY n")
            #expect(try rows.map { try $0.decode(Int64?.self, at: 0) } == values)
            let dates: [Date?] = [Date(timeIntervalSince1970: 86_400.125), nil, .distantFuture]
            let times = try await connection.query("SELECT x FROM unnest(\(dates)::timestamptz[]) WITH ORDINALITY AS t(x, n) ORDER BY n")
            #expect(try times.map { try $0.decode(Date?.self, at: 0) } == dates)
        }
    }

    /// Arrays of strings go in binary format (`array_recv`): the same values come back through
    /// prepared statements too, whichever value a statement was prepared with, and the form
    /// is `text[]` whatever the cast after it.
    @Test func textArraysInBinaryFormat() async throws {
        let values: [String?] = ["{\"json\": [1, \"\\\\\"]}", nil, "", "😀 é", String(repeating: "x", count: 70_000)]
        #expect(values.postgresValue == .textArray(Self.arraySend(values)))
        let empty: [String] = []
        #expect(empty.postgresValue == .textArray(Self.arraySend(empty)))
        try await TestDatabase.withConnection { connection in
            // What the server sends back for the same array is byte for byte what was bound.
            let sent = try await connection.preparedQuery("SELECT array_send(\(values)::text[]), array_send(\(empty)::text[])")
            #expect(try sent[0].decode(Data.self, at: 0) == Data(Self.arraySend(values)))
            #expect(try sent[0].decode(Data.self, at: 1) == Data(Self.arraySend(empty)))
            for _ in 0..<2 {
                let none: [String]? = nil
                let rows = try await connection.preparedQuery(
                    "SELECT \(none)::text[] IS NULL, cardinality(\(values)::text[]), (\(values)::text[])[5] = repeat('x', 70000)")
                #expect(try rows[0].decode(Bool.self, at: 0))
                #expect(try rows[0].decode(Int.self, at: 1) == values.count)
                #expect(try rows[0].decode(Bool.self, at: 2))
            }
            // A statement prepared with NULL for the array, then run with one.
            let statement = "SELECT coalesce(cardinality($1::text[]), -1)"
            for (array, expected) in [([String]?.none, -1), (["a", "b"], 2)] {
                let rows = try await connection.preparedQuery(PostgresQuery(statement, binds: [array.postgresValue]))
                #expect(try rows[0].decode(Int.self, at: 0) == expected)
            }
            // Another element type through a text[] cast.
            let ids = [UUID(), UUID()].map { $0.uuidString.lowercased() }
            let uuids = try await connection.preparedQuery("SELECT x FROM unnest(\(ids)::text[]::uuid[]) WITH ORDINALITY AS t(x, n) ORDER BY n")
            #expect(try uuids.map { try $0.decode(UUID.self, at: 0).uuidString.lowercased() } == ids)
            // NUL cannot be text: refused before anything is sent, as for a single value.
            let nul = await thrownError { _ = try await connection.preparedQuery("SELECT \(["a", "b\u{0}c"])::text[]") }
            #expect((nul as? PostgresError)?.kind == .encoding)
            let after = try await connection.preparedQuery("SELECT 1")
            #expect(try after[0].decode(Int.self, at: 0) == 1)
        }
    }

    /// Arrays of numbers, booleans, ids, dates and doubles go in binary format too, with their
    /// array type (docs/PERFORMANCE.md, *In the code*). A date bound in an array is the very
    /// value the server makes of the same date bound alone (as text): leases are compared for
    /// equality. The server's casts take the declared type to the statement's (`int8[]` to
    /// `int[]`, refusing what does not fit), and a statement prepared with one declared type is
    /// prepared again for another.
    @Test func otherArraysInBinaryFormat() async throws {
        var generator = SystemRandomNumberGenerator()
        let dates: [Date] = [
            .distantPast, .distantFuture, Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: -62_135_596_800.5),
            Date(timeIntervalSince1970: 946_684_800), Date(timeIntervalSince1970: 946_684_799.9999995),
            Date(timeIntervalSince1970: 1_764_000_000.0000005), Date(timeIntervalSince1970: -210_000_000_000.25),
        ] + (0..<300).map { _ in Date(timeIntervalSince1970: Double.random(in: -70_000_000_000...300_000_000_000, using: &generator)) }
        guard case .binaryArray(let dateType, _) = dates.postgresValue, case .binaryArray(let intType, _) = [1, 2].postgresValue,
            case .binaryArray(let optionalType, _) = [UUID?.none].postgresValue
        else {
            Issue.record("arrays of dates, integers and ids are not bound in binary format")
            return
        }
        #expect(dateType == 1185 && intType == 1016 && optionalType == 2951)
        try await TestDatabase.withConnection { connection in
            for date in dates {
                let rows = try await connection.preparedQuery(
                    "SELECT (\([date, date])::timestamptz[])[2] = \(date)::timestamptz, (\([date])::timestamptz[])[1]::text, \(date)::timestamptz::text")
                let (inArray, alone) = (try rows[0].decode(String.self, at: 1), try rows[0].decode(String.self, at: 2))
                #expect(try rows[0].decode(Bool.self, at: 0), "\(date.timeIntervalSince1970): \(inArray) against \(alone)")
            }
            // Beyond PostgreSQL's range: refused, as its text is, not stored as something else.
            for date in [Date(timeIntervalSince1970: 9_300_000_000_000), Date(timeIntervalSince1970: 1e16), Date(timeIntervalSince1970: -1e16)] {
                let error = await thrownError { _ = try await connection.preparedQuery("SELECT \([date])::timestamptz[]") }
                #expect((error as? PostgresError)?.kind == .server, "\(date.timeIntervalSince1970)")
                let alone = await thrownError { _ = try await connection.preparedQuery("SELECT \(date)::timestamptz") }
                #expect((alone as? PostgresError)?.kind == .server, "\(date.timeIntervalSince1970) alone")
            }
            let ints: [Int?] = [.min, nil, -1, 0, .max]
            let ids: [UUID?] = [UUID(), nil, UUID()]
            let flags: [Bool?] = [true, nil, false]
            let doubles: [Double?] = [-0.0, 1.5, nil, .infinity, -.infinity, 1e-300]
            let empty: [Int64] = []
            for _ in 0..<2 {
                let rows = try await connection.preparedQuery(
                    """
                    SELECT array_send(\(ints)::bigint[]) = \(Data(Self.int8ArraySend(ints))), \(ids)::uuid[]::text,
                           \(flags)::bool[]::text, \(doubles)::float8[]::text, cardinality(\(empty)::bigint[])
                    """)
                #expect(try rows[0].decode(Bool.self, at: 0), "array_send of the bound int8[] is not what was sent")
                #expect(try rows[0].decode(String.self, at: 1) == "{\(ids.map { $0.map(\.uuidString).map { $0.lowercased() } ?? "NULL" }.joined(separator: ","))}")
                #expect(try rows[0].decode(String.self, at: 2) == "{t,NULL,f}")
                #expect(try rows[0].decode(String.self, at: 3) == "{-0,1.5,NULL,Infinity,-Infinity,1e-300}")
                #expect(try rows[0].decode(Int.self, at: 4) == 0)
            }
            // int8[] into int[]: converted element by element, and refused when one does not fit.
            let small = try await connection.preparedQuery("SELECT sum(x), pg_typeof(x)::text FROM unnest(\([1, -2, 40])::int[]) AS t(x) GROUP BY 2")
            #expect(try small[0].decode(Int.self, at: 0) == 39 && small[0].decode(String.self, at: 1) == "integer")
            let tooBig = await thrownError { _ = try await connection.preparedQuery("SELECT \([Int(Int32.max) + 1])::int[]") }
            #expect((tooBig as? PostgresError)?.kind == .server)
            // One statement text, prepared with a NULL array, then an array, then NULL again.
            let statement = "SELECT coalesce(cardinality($1::timestamptz[]), -1)"
            for (array, expected) in [([Date]?.none, -1), ([Date(), Date()], 2), (nil, -1), ([Date()], 1)] {
                let rows = try await connection.preparedQuery(PostgresQuery(statement, binds: [array.postgresValue]))
                #expect(try rows[0].decode(Int.self, at: 0) == expected)
            }
        }
    }

    /// PostgreSQL's `array_send` of a one-dimensional `int8[]`, written out independently.
    private static func int8ArraySend(_ values: [Int?]) -> [UInt8] {
        func int(_ value: Int, width: Int = 4) -> [UInt8] { (0..<width).map { UInt8(truncatingIfNeeded: value >> (8 * (width - 1 - $0))) } }
        var bytes = int(values.isEmpty ? 0 : 1) + int(values.contains(nil) ? 1 : 0) + int(20)
        if !values.isEmpty { bytes += int(values.count) + int(1) }
        for value in values {
            if let value { bytes += int(8) + int(value, width: 8) } else { bytes += int(-1) }
        }
        return bytes
    }

    /// PostgreSQL's `array_send` of a one-dimensional `text[]`, written out independently.
    private static func arraySend(_ values: [String?]) -> [UInt8] {
        func int(_ value: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * (3 - $0))) } }
        var bytes = int(values.isEmpty ? 0 : 1) + int(values.contains(nil) ? 1 : 0) + int(25)
        if !values.isEmpty { bytes += int(values.count) + int(1) }
        for value in values {
            if let value { bytes += int(value.utf8.count) + Array(value.utf8) } else { bytes += int(-1) }
        }
        return bytes
    }

    private static func arraySend(_ values: [String]) -> [UInt8] { arraySend(values.map { Optional($0) }) }

    @Test func nullIntoNonOptionalAndOtherMisreadsAreDecodingErrors() async throws {
        try await TestDatabase.withConnection { connection in
            let rows = try await connection.query("SELECT NULL::text AS nothing, 'abc'::text AS word, 1.5::float8 AS number")
            let row = try #require(rows.first)
            for attempt in [
                await thrownError { _ = try row.decode(String.self, at: 0) },
                await thrownError { _ = try row.decode(Int.self, column: "nothing") },
                await thrownError { _ = try row.decode(Int.self, column: "word") },
                await thrownError { _ = try row.decode(Bool.self, column: "word") },
                await thrownError { _ = try row.decode(UUID.self, column: "word") },
                await thrownError { _ = try row.decode(Date.self, column: "word") },
                await thrownError { _ = try row.decode(Data.self, column: "word") },
                await thrownError { _ = try row.decode(Int.self, column: "number") },
                await thrownError { _ = try row.decode(String.self, at: 3) },
                await thrownError { _ = try row.decode(String.self, column: "absent") },
            ] {
                let error = try #require(attempt as? PostgresError, "expected a PostgresError, got \(String(describing: attempt))")
                #expect(error.kind == .decoding)
            }
            #expect(try row.decode(String?.self, at: 0) == nil)
            #expect(row.isNull(0) && !row.isNull(1))
            // The cell's value is data: only the debug description shows it.
            let misread = try #require(await thrownError { _ = try row.decode(Int.self, column: "word") } as? PostgresError)
            #expect(misread.column == "word")
            #expect(!misread.description.contains("abc"))
            #expect(misread.debugDescription.contains("abc"))
            #expect(try row.decode(String.self, column: "word") == "abc")
        }
    }
}
