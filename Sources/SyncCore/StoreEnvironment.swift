/// The StoreKit environment a transaction belongs to. Decoding is case-insensitive so that
/// StoreKit's own spelling (`"Production"`, `"Sandbox"`, `"Xcode"`) is accepted; encoding is lower case.
public enum StoreEnvironment: String, Sendable, Equatable, Hashable, Codable, CaseIterable {
    case production
    case sandbox
    case xcode

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let raw = try container.decode(String.self)
        guard let value = StoreEnvironment(rawValue: raw.lowercased()) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "unknown environment '\(raw)' (expected production, sandbox or xcode)")
        }
        self = value
    }
}
