import Foundation

/// RFC 3339 timestamps as subsync writes them (`2026-11-21T02:23:17.123456Z`), with or without
/// fractional seconds.
///
/// `ISO8601DateFormatter` keeps only milliseconds of a fraction, and platforms differ in how
/// many fraction digits they accept, so the fraction is split off and parsed separately: the
/// rest is parsed by a formatter without `.withFractionalSeconds`. A formatter is created per
/// call: formatters are not safe to share between threads without a lock.
enum RFC3339 {
    /// The instant `text` denotes, or `nil` when it is not an RFC 3339 date-time.
    static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        // In an RFC 3339 date-time a "." can only start the fraction of the seconds.
        guard let dot = bytes.firstIndex(of: UInt8(ascii: ".")) else {
            return parseWhole(text)
        }
        var end = dot + 1
        while end < bytes.count, bytes[end] >= UInt8(ascii: "0"), bytes[end] <= UInt8(ascii: "9") {
            end += 1
        }
        let digits = bytes[(dot + 1)..<end]
        guard !digits.isEmpty else { return nil }
        // Nanoseconds are the most a `Date` can hold usefully.
        let significant = String(decoding: digits.prefix(9), as: UTF8.self)
        guard let fraction = Double("0." + significant) else { return nil }
        let whole = String(decoding: bytes[..<dot], as: UTF8.self) + String(decoding: bytes[end...], as: UTF8.self)
        guard let seconds = parseWhole(whole) else { return nil }
        return seconds.addingTimeInterval(fraction)
    }

    /// `date` in UTC with microseconds (omitted when zero), as subsync writes it.
    static func format(_ date: Date) -> String {
        let formatter = makeFormatter()
        let interval = date.timeIntervalSince1970
        guard interval.isFinite else { return formatter.string(from: date) }
        var seconds = interval.rounded(.down)
        var micros = Int(((interval - seconds) * 1_000_000).rounded())
        if micros >= 1_000_000 {
            seconds += 1
            micros -= 1_000_000
        }
        let base = formatter.string(from: Date(timeIntervalSince1970: seconds))
        guard micros > 0, base.hasSuffix("Z") else { return base }
        let digits = String(micros)
        let padded = String(repeating: "0", count: max(0, 6 - digits.count)) + digits
        return String(base.dropLast()) + "." + padded + "Z"
    }

    private static func parseWhole(_ text: String) -> Date? {
        makeFormatter().date(from: text)
    }

    private static func makeFormatter() -> ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        formatter.timeZone = TimeZone(secondsFromGMT: 0)
        return formatter
    }
}

extension KeyedDecodingContainer {
    /// The RFC 3339 date-time string at `key`.
    func decodeRFC3339(forKey key: Key) throws -> Date {
        let text = try decode(String.self, forKey: key)
        guard let date = RFC3339.parse(text) else {
            throw DecodingError.dataCorruptedError(
                forKey: key, in: self, debugDescription: "Not an RFC 3339 date-time: \(text)")
        }
        return date
    }

    /// The RFC 3339 date-time string at `key`; `nil` when it is `null` or absent.
    func decodeRFC3339IfPresent(forKey key: Key) throws -> Date? {
        guard let text = try decodeIfPresent(String.self, forKey: key) else { return nil }
        guard let date = RFC3339.parse(text) else {
            throw DecodingError.dataCorruptedError(
                forKey: key, in: self, debugDescription: "Not an RFC 3339 date-time: \(text)")
        }
        return date
    }
}

extension KeyedEncodingContainer {
    /// Writes `date` as an RFC 3339 string, or `null`.
    mutating func encodeRFC3339(_ date: Date?, forKey key: Key) throws {
        if let date {
            try encode(RFC3339.format(date), forKey: key)
        } else {
            try encodeNil(forKey: key)
        }
    }
}
