/// The value of a usage limit such as `monthly_minutes`.
///
/// In JSON a limit is a non-negative integer, or `null` for **unlimited** (the catalogue and the
/// resolved state use the same form). A limit key that is absent from a tier means "inherit from
/// the tier below", which is why unlimited needs an explicit `null` rather than a missing key.
public enum LimitValue: Sendable, Hashable, Codable, Comparable, CustomStringConvertible {
    case limited(Int)
    case unlimited

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .unlimited
        } else {
            self = .limited(try container.decode(Int.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .limited(let value): try container.encode(value)
        case .unlimited: try container.encodeNil()
        }
    }

    /// Whether `amount` uses stay within this limit.
    public func allows(_ amount: Int) -> Bool {
        switch self {
        case .limited(let value): amount <= value
        case .unlimited: true
        }
    }

    /// Unlimited is greater than every finite value.
    public static func < (lhs: LimitValue, rhs: LimitValue) -> Bool {
        switch (lhs, rhs) {
        case (.limited(let l), .limited(let r)): l < r
        case (.limited, .unlimited): true
        case (.unlimited, _): false
        }
    }

    public var description: String {
        switch self {
        case .limited(let value): String(value)
        case .unlimited: "unlimited"
        }
    }
}
