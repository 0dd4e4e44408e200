import Foundation
@testable import Postgres
import PropertyBased
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

    /// The four-digit years' shortcut writes what the general path writes, in both styles, for
    /// every microsecond of the years 1 to 9999 (and the general path's own years around them).
    @Test func fourDigitYearsAreWrittenAsTheGeneralPathWritesThem() async {
        // 0001-01-01 to 9999-12-31 in microseconds since 1970, and a margin on both sides.
        let first: Int64 = -62_135_596_800_000_000, last: Int64 = 253_402_300_799_999_999
        await propertyCheck(count: 4000, input: Gen.int64(in: (first - 86_400_000_000)...(last + 86_400_000_000))) { micros in
            let date = Date(timeIntervalSince1970: Double(micros) / 1_000_000)
            for style in [PostgresTimestamp.Style.postgres, .rfc3339] {
                var shortcut: [UInt8] = [], general: [UInt8] = []
                PostgresTimestamp.append(date, style: style, to: &shortcut)
                PostgresTimestamp.append(date, style: style, to: &general, fourDigitYears: false)
                #expect(shortcut == general, "\(micros): \(String(decoding: shortcut, as: UTF8.self)) against \(String(decoding: general, as: UTF8.self))")
            }
        }
        // Whole seconds, whole days, the ends of the range, and after other bytes.
        for seconds in [0.0, -1, 86_400, 951_782_400, -62_135_596_800, 253_402_300_799, 253_402_300_800, 1_700_000_000.5, 1_700_000_000.000_001] {
            let date = Date(timeIntervalSince1970: seconds)
            for style in [PostgresTimestamp.Style.postgres, .rfc3339] {
                var shortcut: [UInt8] = Array("x".utf8), general: [UInt8] = Array("x".utf8)
                PostgresTimestamp.append(date, style: style, to: &shortcut)
                PostgresTimestamp.append(date, style: style, to: &general, fourDigitYears: false)
                #expect(shortcut == general, "\(seconds)")
            }
        }
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
