/// Why the store revoked a transaction (StoreKit's `revocationReason`). Decodes both the names
/// below and StoreKit's numeric codes (`0` = other, `1` = developer issue); encodes the names.
public enum RevocationReason: String, Sendable, Equatable, Hashable, Codable, CaseIterable {
    /// Refunded because of an issue in the app (StoreKit code 1).
    case developerIssue = "developer_issue"
    /// Refunded for another reason, e.g. an accidental purchase (StoreKit code 0).
    case other

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let code = try? container.decode(Int.self) {
            switch code {
            case 0: self = .other
            case 1: self = .developerIssue
            default:
                throw DecodingError.dataCorruptedError(
                    in: container, debugDescription: "unknown revocation reason code \(code)")
            }
            return
        }
        let raw = try container.decode(String.self)
        guard let value = RevocationReason(rawValue: raw.lowercased()) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "unknown revocation reason '\(raw.prefix(40))'")
        }
        self = value
    }
}
