import Foundation

/// Converts between `Date` and PostgreSQL's ISO text form of `timestamptz`.
///
/// Sessions run with `TimeZone=UTC` and `DateStyle=ISO` (see ``ConnectionConfiguration``), so
/// the server prints `2026-11-21 02:23:17.123456+00`. Formatting and parsing are done by hand:
/// they are on every row's hot path, and `DateFormatter` is neither fast nor `Sendable`.
/// Precision is the server's, one microsecond.
enum PostgresTimestamp {
    /// Seconds between 1970-01-01 and `Date`'s reference date, 2001-01-01.
    private static let referenceDateUnixSeconds: Int64 = 978_307_200
    /// Beyond about three billion years there is no calendar text worth sending; such a
    /// (non-)date is sent as `infinity`/`-infinity`, as are the infinite Doubles.
    private static let largestFormattableInterval = 1.0e17

    /// Formats a date as `timestamptz` text in UTC (or as RFC 3339, see ``Style``), rounded to the microsecond.
    ///
    /// `Date.distantFuture`/`.distantPast` become `infinity`/`-infinity` (and parse back to
    /// them). Years before 1 AD use PostgreSQL's ` BC` suffix; years past 9999 get more digits.
    /// Dates outside PostgreSQL's range (4713 BC to 294276 AD) are formatted all the same, so
    /// the server rejects them rather than storing something else.
    static func format(_ date: Date, style: Style = .postgres) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        append(date, style: style, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The two texts a date is written as.
    enum Style {
        /// `2026-11-21 02:23:17.123456+00`, what the server prints (and `infinity`, ` BC`).
        case postgres
        /// `2026-11-21T02:23:17.123456Z` (RFC 3339); the infinities and years before 1 AD,
        /// which RFC 3339 cannot express, are written as in ``postgres``.
        case rfc3339
    }

    /// Appends the text of `date` in `style` to `bytes`, without building a `String`: this is
    /// on the path of every date parameter and every date in a JSON document.
    /// `fourDigitYears: false` takes the general path for every date (tests compare the two).
    static func append(_ date: Date, style: Style, to bytes: inout [UInt8], fourDigitYears: Bool = true) {
        if date == .distantFuture { return bytes.append(contentsOf: "infinity".utf8) }
        if date == .distantPast { return bytes.append(contentsOf: "-infinity".utf8) }
        // Work from the reference date, which is what `Date` stores, so no extra rounding
        // creeps in; whole seconds and the fraction are split exactly.
        let interval = date.timeIntervalSinceReferenceDate
        guard interval.isFinite, abs(interval) < largestFormattableInterval else {
            return bytes.append(contentsOf: (interval > 0 ? "infinity" : "-infinity").utf8)
        }
        let (unixSeconds, micros) = split(interval)
        var days = unixSeconds / 86_400
        var secondsOfDay = unixSeconds % 86_400
        if secondsOfDay < 0 {
            secondsOfDay += 86_400
            days -= 1
        }
        let (year, month, day) = civilDate(fromDaysSinceEpoch: days)
        let rfc3339 = style == .rfc3339 && year > 0
        if fourDigitYears, (1...9999).contains(year) {
            return appendFourDigitYear(
                year: year, month: month, day: day, secondsOfDay: secondsOfDay, micros: micros, rfc3339: rfc3339, to: &bytes)
        }
        // Astronomical year 0 is 1 BC, -1 is 2 BC, ...
        appendPadded(&bytes, year > 0 ? year : 1 - year, width: 4)
        bytes.append(UInt8(ascii: "-"))
        appendPadded(&bytes, month, width: 2)
        bytes.append(UInt8(ascii: "-"))
        appendPadded(&bytes, day, width: 2)
        bytes.append(rfc3339 ? UInt8(ascii: "T") : UInt8(ascii: " "))
        appendPadded(&bytes, secondsOfDay / 3600, width: 2)
        bytes.append(UInt8(ascii: ":"))
        appendPadded(&bytes, (secondsOfDay / 60) % 60, width: 2)
        bytes.append(UInt8(ascii: ":"))
        appendPadded(&bytes, secondsOfDay % 60, width: 2)
        if micros != 0 {
            bytes.append(UInt8(ascii: "."))
            appendPadded(&bytes, micros, width: 6)
        }
        if rfc3339 { return bytes.append(UInt8(ascii: "Z")) }
        bytes.append(contentsOf: "+00".utf8)
        if year <= 0 { bytes.append(contentsOf: " BC".utf8) }
    }

    /// The text of a date in the years 1 to 9999 (every date the service writes), built in a
    /// buffer on the stack and appended once, not a digit at a time with each append checking
    /// the array's capacity and uniqueness: every date of a batch goes through it
    /// (docs/PERFORMANCE.md, *In the code*). The same text as the general path below, which
    /// `TimestampTests` holds it to.
    private static func appendFourDigitYear(
        year: Int64, month: Int64, day: Int64, secondsOfDay: Int64, micros: Int64, rfc3339: Bool, to bytes: inout [UInt8]
    ) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { text in
            var at = 0
            func put(_ byte: UInt8) {
                text[at] = byte
                at += 1
            }
            func pair(_ value: Int64) {
                text[at] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value / 10)
                text[at + 1] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value % 10)
                at += 2
            }
            pair(year / 100)
            pair(year % 100)
            put(UInt8(ascii: "-"))
            pair(month)
            put(UInt8(ascii: "-"))
            pair(day)
            put(rfc3339 ? UInt8(ascii: "T") : UInt8(ascii: " "))
            pair(secondsOfDay / 3600)
            put(UInt8(ascii: ":"))
            pair((secondsOfDay / 60) % 60)
            put(UInt8(ascii: ":"))
            pair(secondsOfDay % 60)
            if micros != 0 {
                put(UInt8(ascii: "."))
                pair(micros / 10_000)
                pair((micros / 100) % 100)
                pair(micros % 100)
            }
            if rfc3339 {
                put(UInt8(ascii: "Z"))
            } else {
                put(UInt8(ascii: "+"))
                pair(0)
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: text[..<at]))
        }
    }

    /// Whole Unix seconds and the microseconds after them (0 ..< 1,000,000) of a finite
    /// interval since the reference date: the one rounding that the text and the binary form share.
    private static func split(_ interval: TimeInterval) -> (unixSeconds: Int64, micros: Int64) {
        var wholeSeconds = interval.rounded(.down)
        var micros = Int64(((interval - wholeSeconds) * 1_000_000).rounded())
        if micros >= 1_000_000 {
            wholeSeconds += 1
            micros -= 1_000_000
        }
        return (Int64(wholeSeconds) + referenceDateUnixSeconds, micros)
    }

    /// Seconds between 1970-01-01 and PostgreSQL's epoch, 2000-01-01.
    private static let postgresEpochUnixSeconds: Int64 = 946_684_800

    /// `timestamptz` in PostgreSQL's binary form (`timestamptz_recv`): microseconds since
    /// 2000-01-01 UTC, rounded exactly as ``format(_:style:)`` rounds, so a date bound either way is
    /// the same value on the server (leases are compared for equality). The infinities as in
    /// ``append(_:style:to:)``; a date whose microseconds do not fit 64 bits is sent as a value
    /// beyond PostgreSQL's range, which the server refuses, as it refuses such a date's text.
    static func binary(_ date: Date) -> Int64 {
        if date == .distantFuture { return .max }
        if date == .distantPast { return .min }
        let interval = date.timeIntervalSinceReferenceDate
        guard interval.isFinite, abs(interval) < largestFormattableInterval else { return interval > 0 ? .max : .min }
        let (unixSeconds, micros) = split(interval)
        let (scaled, overflow) = (unixSeconds - postgresEpochUnixSeconds).multipliedReportingOverflow(by: 1_000_000)
        let (total, overflowAgain) = scaled.addingReportingOverflow(micros)
        guard !overflow, !overflowAgain else { return interval > 0 ? .max - 1 : .min + 1 }
        return total
    }

    /// Parses `YYYY-MM-DD[( |T)HH:MM:SS[.ffffff]][(+|-)HH[:MM[:SS]]|Z][ BC]`.
    static func parse<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Date? where Bytes.Index == Int {
        var reader = DigitReader(bytes: bytes)
        if bytes.elementsEqual("infinity".utf8) { return .distantFuture }
        if bytes.elementsEqual("-infinity".utf8) { return .distantPast }
        guard let year = reader.number(digits: 4), reader.skip("-"),
            let month = reader.number(digits: 2), reader.skip("-"),
            let day = reader.number(digits: 2)
        else { return nil }
        var seconds: Int64 = 0
        var micros: Int64 = 0
        if reader.skip(" ") || reader.skip("T") {
            guard let hour = reader.number(digits: 2), reader.skip(":"),
                let minute = reader.number(digits: 2), reader.skip(":"),
                let second = reader.number(digits: 2),
                hour <= 24, minute <= 59, second <= 60
            else { return nil }
            seconds = hour * 3600 + minute * 60 + second
            if reader.skip(".") {
                var scale: Int64 = 100_000
                var sawDigit = false
                while let digit = reader.digit() {
                    micros += digit * scale
                    scale /= 10
                    sawDigit = true
                }
                guard sawDigit else { return nil }
            }
        }
        var offsetSeconds: Int64 = 0
        if let sign = reader.sign() {
            guard let hours = reader.number(digits: 2) else { return nil }
            var offset = hours * 3600
            if reader.skip(":") {
                guard let minutes = reader.number(digits: 2) else { return nil }
                offset += minutes * 60
                if reader.skip(":") {
                    guard let secs = reader.number(digits: 2) else { return nil }
                    offset += secs
                }
            }
            offsetSeconds = sign * offset
        } else if reader.skip("Z") {
            offsetSeconds = 0
        }
        var astronomicalYear = year
        if reader.skip(" ") {
            guard reader.skip("B"), reader.skip("C"), year >= 1 else { return nil }
            astronomicalYear = 1 - year
        }
        guard reader.atEnd, (1...12).contains(month), (1...31).contains(day) else { return nil }
        let days = daysSinceEpoch(year: astronomicalYear, month: month, day: day)
        let sinceReference = days * 86_400 + seconds - offsetSeconds - referenceDateUnixSeconds
        // One rounding when the microsecond count fits a Double exactly (about ±285 years
        // around 2001), so every microsecond the server sends comes back as the nearest Date.
        let (totalMicros, overflow) = sinceReference.multipliedReportingOverflow(by: 1_000_000)
        if !overflow, abs(totalMicros) < 1 << 53 {
            return Date(timeIntervalSinceReferenceDate: Double(totalMicros + micros) / 1_000_000)
        }
        return Date(timeIntervalSinceReferenceDate: Double(sinceReference) + Double(micros) / 1_000_000)
    }

    // Howard Hinnant's days_from_civil / civil_from_days, proleptic Gregorian calendar.
    static func daysSinceEpoch(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func civilDate(fromDaysSinceEpoch days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (year, month, day)
    }

    /// Appends the decimal digits of `value` (not negative), zero-padded to `width`.
    private static func appendPadded(_ bytes: inout [UInt8], _ value: Int64, width: Int) {
        appendDigits(&bytes, UInt64(value), width: width)
    }

    /// Appends the decimal digits of `value`, zero-padded to `width`, without building a String
    /// (also the array literal's integers, `appendArrayElementText`).
    static func appendDigits(_ bytes: inout [UInt8], _ value: UInt64, width: Int) {
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        var rest = value
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[count] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
                count += 1
            } while rest > 0 && count < buffer.count
        }
        if count < width { bytes.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: width - count)) }
        withUnsafeBytes(of: &digits) { buffer in
            for index in stride(from: count - 1, through: 0, by: -1) { bytes.append(buffer[index]) }
        }
    }
}

/// A cursor over ASCII bytes for the timestamp parser.
private struct DigitReader<Bytes: Collection<UInt8>> where Bytes.Index == Int {
    let bytes: Bytes
    var index: Int

    init(bytes: Bytes) {
        self.bytes = bytes
        self.index = bytes.startIndex
    }

    var atEnd: Bool { index >= bytes.endIndex }

    mutating func digit() -> Int64? {
        guard index < bytes.endIndex else { return nil }
        let byte = bytes[index]
        guard byte >= 0x30, byte <= 0x39 else { return nil }
        index += 1
        return Int64(byte - 0x30)
    }

    mutating func number(digits count: Int) -> Int64? {
        var value: Int64 = 0
        for _ in 0..<count {
            guard let next = digit() else { return nil }
            value = value * 10 + next
        }
        // Years beyond 9999 have more digits; PostgreSQL's range ends in year 294276, so more
        // than six digits is not a date (and would overflow the arithmetic below).
        var extraDigits = 0
        while count == 4, let next = digit() {
            extraDigits += 1
            guard extraDigits <= 2 else { return nil }
            value = value * 10 + next
        }
        return value
    }

    mutating func skip(_ character: Unicode.Scalar) -> Bool {
        guard index < bytes.endIndex, bytes[index] == UInt8(ascii: character) else { return false }
        index += 1
        return true
    }

    mutating func sign() -> Int64? {
        if skip("+") { return 1 }
        if skip("-") { return -1 }
        return nil
    }
}
