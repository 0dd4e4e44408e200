import Foundation

/// Converts between `Date` and PostgreSQL's ISO text form of `timestamptz`.
///
/// Sessions run with `TimeZone=UTC` and `DateStyle=ISO` (see ``ConnectionConfiguration``), so
/// the server prints `2026-11-21 02:23:17.123456+00`. Formatting and parsing are done by hand:
/// they are on every row's hot path, and `DateFormatter` is neither fast nor `Sendable`.
/// Precision is the server's, one microsecond.
enum PostgresTimestamp {
    static func format(_ date: Date) -> String {
        let totalMicros = (date.timeIntervalSince1970 * 1_000_000).rounded()
        guard totalMicros.isFinite, abs(totalMicros) < 9.0e15 else {
            return totalMicros > 0 ? "infinity" : "-infinity"
        }
        let micros = Int64(totalMicros)
        var days = micros / 86_400_000_000
        var microsOfDay = micros % 86_400_000_000
        if microsOfDay < 0 {
            microsOfDay += 86_400_000_000
            days -= 1
        }
        let (year, month, day) = civilDate(fromDaysSinceEpoch: days)
        let secondsOfDay = microsOfDay / 1_000_000
        let fraction = microsOfDay % 1_000_000
        var text = ""
        text.reserveCapacity(32)
        appendPadded(&text, year, width: 4)
        text += "-"
        appendPadded(&text, month, width: 2)
        text += "-"
        appendPadded(&text, day, width: 2)
        text += " "
        appendPadded(&text, secondsOfDay / 3600, width: 2)
        text += ":"
        appendPadded(&text, (secondsOfDay / 60) % 60, width: 2)
        text += ":"
        appendPadded(&text, secondsOfDay % 60, width: 2)
        if fraction != 0 {
            text += "."
            appendPadded(&text, fraction, width: 6)
        }
        text += "+00"
        return text
    }

    /// Parses `YYYY-MM-DD HH:MM:SS[.ffffff][+HH[:MM[:SS]]]`; also accepts `T` as separator.
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
                let second = reader.number(digits: 2)
            else { return nil }
            seconds = hour * 3600 + minute * 60 + second
            if reader.skip(".") {
                var scale: Int64 = 100_000
                while let digit = reader.digit() {
                    micros += digit * scale
                    scale /= 10
                }
            }
        }
        var offsetSeconds: Int64 = 0
        if let sign = reader.sign() {
            guard let hours = reader.number(digits: 2) else { return nil }
            var offset = hours * 3600
            if reader.skip(":"), let minutes = reader.number(digits: 2) {
                offset += minutes * 60
                if reader.skip(":"), let secs = reader.number(digits: 2) { offset += secs }
            }
            offsetSeconds = sign * offset
        } else if reader.skip("Z") {
            offsetSeconds = 0
        }
        guard reader.atEnd, (1...12).contains(month), (1...31).contains(day) else { return nil }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        let whole = days * 86_400 + seconds - offsetSeconds
        return Date(timeIntervalSince1970: Double(whole) + Double(micros) / 1_000_000)
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

    private static func appendPadded(_ text: inout String, _ value: Int64, width: Int) {
        let digits = String(value)
        if digits.count < width { text += String(repeating: "0", count: width - digits.count) }
        text += digits
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
        // Years beyond 9999 have more digits.
        while count == 4, let next = digit() { value = value * 10 + next }
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
