/// The value of a usage limit in an account's state (`limits` of ``WebhookAccountState``) or a
/// usage period's allowance (``WebhookUsage/allowance``).
///
/// In JSON a limit is an integer, or `null` for **unlimited**.
public enum WebhookLimit: Sendable, Hashable, Codable, CustomStringConvertible {
    /// At most this many units.
    case limited(Int)
    /// No limit (`null` in JSON).
    case unlimited

    /// Decodes an integer, or `null` as ``unlimited``.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .unlimited
        } else {
            self = .limited(try container.decode(Int.self))
        }
    }

    /// Encodes an integer, or `null` for ``unlimited``.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .limited(let value): try container.encode(value)
        case .unlimited: try container.encodeNil()
        }
    }

    /// Whether using `amount` units stays within this limit.
    public func allows(_ amount: Int) -> Bool {
        switch self {
        case .limited(let value): amount <= value
        case .unlimited: true
        }
    }

    /// The limit as a number, `nil` when unlimited.
    public var value: Int? {
        switch self {
        case .limited(let value): value
        case .unlimited: nil
        }
    }

    /// `"unlimited"` or the number.
    public var description: String {
        switch self {
        case .limited(let value): String(value)
        case .unlimited: "unlimited"
        }
    }
}
