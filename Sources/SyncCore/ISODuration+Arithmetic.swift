import Foundation

extension ISODuration {
    /// `date` moved forward by this duration in the UTC Gregorian calendar (see ``ISODuration``).
    ///
    /// Implemented with integer civil-date arithmetic rather than `Calendar`, because it runs in
    /// the resolver's hot path for every non-renewing purchase and must be exact and cheap.
    public func advance(_ date: Date) -> Date {
        advance(date, times: 1)
    }

    /// `date` moved by this duration `times` times over (negative: backwards), computed in one
    /// step from `date` so that clamped month ends do not accumulate.
    public func advance(_ date: Date, times: Int) -> Date {
        let months = self.months * times
        let days = self.days * times
        let seconds = date.timeIntervalSince1970
        let dayNumber = (seconds / 86_400).rounded(.down)
        let secondOfDay = seconds - dayNumber * 86_400
        guard dayNumber.magnitude < 1e9 else { return date }  // far outside any store date
        var civil = CivilDate(daysSince1970: Int(dayNumber))
        if months != 0 {
            let monthIndex = civil.year * 12 + (civil.month - 1) + months
            civil.year = monthIndex.floorDiv(12)
            civil.month = monthIndex - civil.year * 12 + 1
            civil.day = min(civil.day, CivilDate.daysInMonth(year: civil.year, month: civil.month))
        }
        let newDayNumber = civil.daysSince1970 + days
        return Date(timeIntervalSince1970: Double(newDayNumber) * 86_400 + secondOfDay).roundedToMicroseconds
    }
}

extension Date {
    /// This instant rounded to the microsecond, PostgreSQL's precision.
    ///
    /// Computed dates (a purchase plus a duration) carry floating-point residue that a
    /// `timestamptz` cannot hold; a stored state read back would then differ from the same state
    /// recomputed, and every re-resolution would look like a change. Rounding exactly as the
    /// database layer parses (`microseconds / 1e6` from the reference date) makes a computed
    /// date survive the round trip unchanged.
    ///
    /// Whole seconds and the fraction are split first, as the database layer's formatter does:
    /// multiplying the whole interval by 10⁶ would lose the bits that decide the rounding.
    public var roundedToMicroseconds: Date {
        let interval = timeIntervalSinceReferenceDate
        guard interval.isFinite, abs(interval) < 9e9 else { return self }
        let whole = interval.rounded(.down)
        let micros = ((interval - whole) * 1_000_000).rounded()
        return Date(timeIntervalSinceReferenceDate: (whole * 1_000_000 + micros) / 1_000_000)
    }

    /// Whole microseconds since 1970, rounded: the `#<µs>` of a ledger entry id written again
    /// for a purchase (``UsageDerivation/creditCorrections(transactions:catalogue:stored:arrived:now:)``,
    /// a transfer's debit).
    public var microsecondsSince1970: Int64 {
        Int64((timeIntervalSince1970 * 1_000_000).rounded())
    }
}

/// A proleptic Gregorian calendar date (Howard Hinnant's `days_from_civil` / `civil_from_days`).
struct CivilDate: Equatable {
    var year: Int
    var month: Int  // 1...12
    var day: Int  // 1...31

    init(year: Int, month: Int, day: Int) {
        self.year = year
        self.month = month
        self.day = day
    }

    init(daysSince1970 z0: Int) {
        let z = z0 + 719_468
        let era = z.floorDiv(146_097)
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        day = dayOfYear - (153 * mp + 2) / 5 + 1
        month = mp < 10 ? mp + 3 : mp - 9
        year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    }

    var daysSince1970: Int {
        let y = month <= 2 ? year - 1 : year
        let era = y.floorDiv(400)
        let yearOfEra = y - era * 400
        let mp = month > 2 ? month - 3 : month + 9
        let dayOfYear = (153 * mp + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }
}

extension Int {
    /// Division rounding toward negative infinity.
    func floorDiv(_ divisor: Int) -> Int {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}
