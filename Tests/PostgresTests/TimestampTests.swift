import Foundation
@testable import Postgres
import TestSupport
import Testing

/// The hand-written `timestamptz` text format, without a server.
@Suite struct TimestampTests {
    static func date(micros: Int64) -> Date {
        DecodingTests.date(micros: micros)
    }

    static func micros(_ date: Date) -> Int64 {
        DecodingTests.micros(of: date)
    }

    @Test func formatsLikeTheServer() {
        #expect(PostgresTimestamp.format(Self.date(micros: 0)) == "1970-01-01 00:00:00+00")
        #expect(PostgresTimestamp.format(Self.date(micros: 1_700_000_000_123_456)) == "2023-11-14 22:13:20.123456+00")
        #expect(PostgresTimestamp.format(Self.date(micros: -1)) == "1969-12-31 23:59:59.999999+00")
        #expect(PostgresTimestamp.format(Self.date(micros: 951_782_400_000_000)) == "2000-02-29 00:00:00+00")
        #expect(PostgresTimestamp.format(Self.date(micros: 1_000)) == "1970-01-01 00:00:00.001+00" || PostgresTimestamp.format(Self.date(micros: 1_000)) == "1970-01-01 00:00:00.001000+00")
        #expect(PostgresTimestamp.format(Date(timeIntervalSince1970: 32_503_680_000)) == "3000-01-01 00:00:00+00")
        #expect(PostgresTimestamp.format(Date(timeIntervalSince1970: -62_135_596_800)) == "0001-01-01 00:00:00+00")
        #expect(PostgresTimestamp.format(Date(timeIntervalSince1970: -62_135_596_801)) == "0001-12-31 23:59:59+00 BC")
        #expect(PostgresTimestamp.format(.distantFuture) == "infinity")
        #expect(PostgresTimestamp.format(.distantPast) == "-infinity")
    }

    @Test func parsesServerOutputAndRFC3339() throws {
        let cases: [(String, Int64)] = [
            ("1970-01-01 00:00:00+00", 0),
            ("2023-11-14 22:13:20.123456+00", 1_700_000_000_123_456),
            ("2023-11-14 22:13:20.1+00", 1_700_000_000_100_000),
            ("2023-11-14T22:13:20.123456Z", 1_700_000_000_123_456),
            ("2023-11-15 03:43:20.123456+05:30", 1_700_000_000_123_456),
            ("2023-11-14 14:13:20.123456-08", 1_700_000_000_123_456),
            ("1969-12-31 23:59:59.999999+00", -1),
            ("1970-01-01", 0),
            ("1969-12-31 23:59:59+00:00:01", -2_000_000),
        ]
        for (text, expected) in cases {
            let parsed = try #require(PostgresTimestamp.parse(Array(text.utf8)), "\(text)")
            #expect(Self.micros(parsed) == expected, "\(text)")
        }
        let bc = try #require(PostgresTimestamp.parse(Array("0001-12-31 23:59:59+00 BC".utf8)))
        #expect(wholeSeconds(bc) == -62_135_596_801)
        #expect(PostgresTimestamp.parse(Array("infinity".utf8)) == .distantFuture)
        #expect(PostgresTimestamp.parse(Array("-infinity".utf8)) == .distantPast)
    }

    func wholeSeconds(_ date: Date) -> Int64 { Int64(date.timeIntervalSince1970.rounded()) }

    @Test(arguments: [
        "", "garbage", "2026", "2026-13-01 00:00:00+00", "2026-00-10 00:00:00+00", "2026-01-32 00:00:00+00",
        "2026-01-01 00:00:00+00 extra", "2026-01-01 0:00:00+00", "2026-01-01 00:00+00", "2026/01/01 00:00:00",
        "2026-01-01 25:00:00+00", "2026-01-01 00:60:00+00", "2026-01-01 00:00:00.+00", "2026-01-01 00:00:00+",
    ])
    func rejectsMalformedText(text: String) {
        #expect(PostgresTimestamp.parse(Array(text.utf8)) == nil)
    }

    @Test func randomRoundTrips() throws {
        var generator = SeededGenerator(seed: 0x71AE)
        for _ in 0..<2_000 {
            // 1940...2060: a Double tells every microsecond apart.
            let micros = Int64.random(in: -946_771_200_000_000...2_840_140_800_000_000, using: &generator)
            let date = Self.date(micros: micros)
            let text = PostgresTimestamp.format(date)
            let back = try #require(PostgresTimestamp.parse(Array(text.utf8)), "\(text)")
            #expect(Self.micros(back) == micros, "\(micros) → \(text) → \(Self.micros(back))")
            #expect(RFC3339.parse(RFC3339.format(date)).map(Self.micros) == micros)
        }
        // Far from 2001 a Double is coarser than a microsecond: the round trip is still stable.
        for _ in 0..<2_000 {
            let seconds = Double.random(in: -200_000_000_000...200_000_000_000, using: &generator)
            let date = Date(timeIntervalSince1970: seconds)
            let text = PostgresTimestamp.format(date)
            let back = try #require(PostgresTimestamp.parse(Array(text.utf8)), "\(text)")
            #expect(abs(back.timeIntervalSince(date)) < 0.000_5, "\(seconds) → \(text)")
            #expect(PostgresTimestamp.format(back) == text)
        }
    }
}
