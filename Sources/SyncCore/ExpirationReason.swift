/// Why an auto-renewable subscription ended or will end, from StoreKit's `expirationIntent` (so
/// that the app can tell the user why their subscription stopped). Encodes the names; decodes
/// the names (in any case) and StoreKit's codes 1-5 (an unknown code is ``other``).
public enum ExpirationReason: String, Sendable, Equatable, Hashable, Codable, CaseIterable {
    /// The customer cancelled (turned auto-renew off). Code 1.
    case cancelled
    /// A billing error: the renewal could not be charged. Code 2.
    case billingError = "billing_error"
    /// The customer did not consent to a price increase. Code 3.
    case priceIncreaseDeclined = "price_increase_declined"
    /// The product was not available for purchase at renewal. Code 4.
    case productUnavailable = "product_unavailable"
    /// Another reason. Code 5, or a code StoreKit adds later.
    case other

    /// The reason of StoreKit's `expirationIntent` code `intent`.
    public init(intent: Int) {
        switch intent {
        case 1: self = .cancelled
        case 2: self = .billingError
        case 3: self = .priceIncreaseDeclined
        case 4: self = .productUnavailable
        default: self = .other
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let code = try? container.decode(Int.self) {
            self.init(intent: code)
            return
        }
        let raw = try container.decode(String.self)
        guard let value = ExpirationReason(rawValue: raw.lowercased()) else {
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "unknown expiration reason '\(raw.prefix(40))' (one of \(Self.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        self = value
    }
}
