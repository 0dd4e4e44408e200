import Foundation

/// The service's JSON: snake_case keys (from each type's `CodingKeys`) and RFC 3339 dates, with
/// or without fractional seconds (the service writes microseconds).
enum WireFormat {
    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(format(date))
        }
        return encoder
    }

    static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = parse(text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "expected an RFC 3339 date-time, got \(text.prefix(40))")
            }
            return date
        }
        return decoder
    }

    /// RFC 3339 in UTC with milliseconds.
    static func format(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    /// RFC 3339 with any number of fractional digits (or none) and `Z` or an offset.
    static func parse(_ text: String) -> Date? {
        var whole = text
        var fraction = 0.0
        if let dot = text.firstIndex(of: ".") {
            let digits = text[text.index(after: dot)...].prefix { $0.isASCII && $0.isNumber }
            guard !digits.isEmpty else { return nil }
            fraction = Double("0." + digits) ?? 0
            whole = String(text[..<dot]) + String(text[text.index(after: dot)...].dropFirst(digits.count))
        }
        guard let base = try? Date.ISO8601FormatStyle().parse(whole) else { return nil }
        return base.addingTimeInterval(fraction)
    }
}

/// A report on the wire (`reports[]` of `POST /v1/accounts/{id}/sync`).
struct WireReport: Sendable, Codable, Hashable {
    var reportID: String
    var observedAt: Date
    var signedTransaction: String?
    var signedRenewalInfo: String?
    var productID: String?
    var originalTransactionID: String?
    var transactionID: String?
    var purchasedAt: Date?
    var expiresAt: Date?
    var gracePeriodExpiresAt: Date?
    var revokedAt: Date?
    var revocationReason: String?
    var isUpgraded: Bool?
    var willAutoRenew: Bool?
    var inBillingRetry: Bool?
    var environment: String?

    enum CodingKeys: String, CodingKey {
        case reportID = "report_id"
        case observedAt = "observed_at"
        case signedTransaction = "signed_transaction"
        case signedRenewalInfo = "signed_renewal_info"
        case productID = "product_id"
        case originalTransactionID = "original_transaction_id"
        case transactionID = "transaction_id"
        case purchasedAt = "purchased_at"
        case expiresAt = "expires_at"
        case gracePeriodExpiresAt = "grace_period_expires_at"
        case revokedAt = "revoked_at"
        case revocationReason = "revocation_reason"
        case isUpgraded = "is_upgraded"
        case willAutoRenew = "will_auto_renew"
        case inBillingRetry = "in_billing_retry"
        case environment
    }

    init(_ purchase: Purchase, observedAt: Date) {
        reportID = purchase.reportID
        self.observedAt = observedAt
        signedTransaction = purchase.signedTransaction
        signedRenewalInfo = purchase.signedRenewalInfo
        if let fields = purchase.transaction {
            productID = fields.productID
            originalTransactionID = fields.originalTransactionID
            transactionID = fields.transactionID
            purchasedAt = fields.purchasedAt
            expiresAt = fields.expiresAt
            gracePeriodExpiresAt = fields.gracePeriodExpiresAt
            revokedAt = fields.revokedAt
            revocationReason = fields.revocationReason
            isUpgraded = fields.isUpgraded
            willAutoRenew = fields.willAutoRenew
            inBillingRetry = fields.inBillingRetry
            environment = fields.environment
        }
    }
}

/// A usage entry on the wire (`usage[]` of `POST /v1/accounts/{id}/usage`).
struct WireUsage: Sendable, Codable, Hashable {
    var id: String
    var meter: String
    var units: Int
    var at: Date
}

/// The `device` object of device bodies.
struct WireDevice: Sendable, Codable, Hashable {
    var id: String
    var platform: String?
    var appVersion: String?

    enum CodingKeys: String, CodingKey {
        case id, platform
        case appVersion = "app_version"
    }
}

struct SyncBody: Encodable {
    var device: WireDevice
    var reports: [WireReport]
}

struct UsageBody: Encodable {
    var device: WireDevice
    var usage: [WireUsage]
}

struct HoldBody: Encodable {
    var device: WireDevice
    var meter: String
    var units: Int
    var ttlSeconds: Int

    enum CodingKeys: String, CodingKey {
        case device, meter, units
        case ttlSeconds = "ttl_seconds"
    }
}

struct SettleBody: Encodable {
    var units: Int
    var at: Date
}

struct SyncAnswer: Decodable {
    var accepted: Int
    var duplicates: Int
    var account: AccountSnapshot
}

struct CatalogueAnswer: Decodable {
    var tiers: [TierSnapshot]
}

struct HoldAnswer: Decodable {
    var granted: Int
    var hold: Hold?
}

/// `{"error": {"code", "message"}}`.
struct ErrorAnswer: Decodable, Sendable {
    struct Detail: Decodable, Sendable {
        var code: String
        var message: String
    }

    var error: Detail
}
