/// Where a subscription's price increase stands, from StoreKit's `priceIncreaseStatus`. Encodes
/// the names; decodes the names and StoreKit's codes 0 and 1.
public enum PriceIncreaseStatus: String, Sendable, Equatable, Hashable, Codable, CaseIterable {
    /// The customer has not yet responded to a price increase that needs their consent. Code 0.
    case pending
    /// The customer consented, or the App Store told them of an increase that needs no consent.
    /// Code 1.
    case accepted

    /// The status of StoreKit's code `code`; `nil` for a code StoreKit has not defined.
    public init?(code: Int) {
        switch code {
        case 0: self = .pending
        case 1: self = .accepted
        default: return nil
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let code = try? container.decode(Int.self) {
            guard let value = PriceIncreaseStatus(code: code) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "unknown price increase status code \(code)")
            }
            self = value
            return
        }
        let raw = try container.decode(String.self)
        guard let value = PriceIncreaseStatus(rawValue: raw.lowercased()) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "unknown price increase status '\(raw.prefix(40))' (pending or accepted)")
        }
        self = value
    }
}
