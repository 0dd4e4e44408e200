/// A calendar duration in ISO-8601 form, date part only: `P[nY][nM][nW][nD]` (e.g. `P1M`, `P3M`,
/// `P1Y`, `P30D`, `P1Y6M`). Time components (`PT...`) are refused: store products are sold in
/// days, weeks, months and years.
///
/// Arithmetic (``advance(_:)``) uses the proleptic Gregorian calendar in UTC: years and months are
/// added first as calendar months (a day past the end of the target month is clamped to its last
/// day, like `Calendar`), then days; the time of day is kept.
public struct ISODuration: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Whole calendar months (years × 12 + months).
    public let months: Int
    /// Whole days (weeks × 7 + days).
    public let days: Int
    /// The text this duration was parsed from, kept so it encodes back unchanged.
    public let text: String

    /// Parses `text`; `nil` when it is not a positive `P[nY][nM][nW][nD]` duration.
    public init?(_ text: String) {
        var bytes = Array(text.utf8)[...]
        guard bytes.first == UInt8(ascii: "P") else { return nil }
        bytes = bytes.dropFirst()
        guard !bytes.isEmpty else { return nil }
        var months = 0
        var days = 0
        // Designators must appear in this order, each at most once.
        let order: [UInt8] = [UInt8(ascii: "Y"), UInt8(ascii: "M"), UInt8(ascii: "W"), UInt8(ascii: "D")]
        var nextDesignator = 0
        while !bytes.isEmpty {
            var number = 0
            var digits = 0
            while let byte = bytes.first, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
                // Cap the value so absurd inputs fail instead of overflowing.
                guard digits < 6 else { return nil }
                number = number * 10 + Int(byte - UInt8(ascii: "0"))
                digits += 1
                bytes = bytes.dropFirst()
            }
            guard digits > 0, let designator = bytes.first,
                let position = order[nextDesignator...].firstIndex(of: designator)
            else { return nil }
            bytes = bytes.dropFirst()
            nextDesignator = position + 1
            switch designator {
            case UInt8(ascii: "Y"): months += number * 12
            case UInt8(ascii: "M"): months += number
            case UInt8(ascii: "W"): days += number * 7
            default: days += number
            }
        }
        guard months > 0 || days > 0 else { return nil }
        self.months = months
        self.days = days
        self.text = text
    }

    public var description: String { text }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let duration = ISODuration(text) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "'\(text)' is not an ISO-8601 duration like P1M, P1Y or P30D")
        }
        self = duration
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(text)
    }

    // Equality is by length, not spelling: `P12M` == `P1Y`.
    public static func == (lhs: ISODuration, rhs: ISODuration) -> Bool {
        lhs.months == rhs.months && lhs.days == rhs.days
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(months)
        hasher.combine(days)
    }
}
