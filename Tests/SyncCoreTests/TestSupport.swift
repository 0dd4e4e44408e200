import Foundation
import SyncCore

/// Product ids of the default catalogue, spelled out once.
enum ProductID {
    static let basicMonthly = "voip.basic.monthly"
    static let basicYearly = "voip.basic.yearly"
    static let premiumMonthly = "voip.premium.monthly"
    static let premiumYearly = "voip.premium.yearly"
    static let businessMonthly = "voip.business.monthly"
    static let businessYearly = "voip.business.yearly"
    static let basicPass3M = "voip.basic.pass.3m"
    static let basicPass6M = "voip.basic.pass.6m"
    static let premiumPass3M = "voip.premium.pass.3m"
    static let premiumPass6M = "voip.premium.pass.6m"
    static let premiumLifetime = "voip.premium.lifetime"
    static let credits = "voip.credits.100"
    static let unknown = "com.elsewhere.gold.monthly"
}

/// A UTC Gregorian calendar, built independently of the module's own civil-date arithmetic so
/// that tests derive expected dates another way.
let utcCalendar: Calendar = {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC") ?? TimeZone(secondsFromGMT: 0) ?? calendar.timeZone
    return calendar
}()

/// A UTC instant.
func utc(_ year: Int, _ month: Int, _ day: Int, _ hour: Int = 0, _ minute: Int = 0) -> Date {
    let components = DateComponents(year: year, month: month, day: day, hour: hour, minute: minute)
    guard let date = utcCalendar.date(from: components) else {
        preconditionFailure("invalid test date \(components)")
    }
    return date
}

/// `date` plus calendar units, via Foundation's Calendar.
func adding(_ component: Calendar.Component, _ value: Int, to date: Date) -> Date {
    guard let result = utcCalendar.date(byAdding: component, value: value, to: date) else {
        preconditionFailure("cannot add \(value) \(component) to \(date)")
    }
    return result
}

/// A report with sensible defaults for tests.
func report(
    _ reportID: String,
    transaction: String,
    original: String? = nil,
    product: String,
    purchased: Date,
    expires: Date? = nil,
    grace: Date? = nil,
    revoked: Date? = nil,
    reason: RevocationReason? = nil,
    upgraded: Bool = false,
    autoRenew: Bool? = true,
    billingRetry: Bool = false,
    observed: Date,
    device: String = "iphone",
    trust: ReportTrust = .unverifiedDevice
) -> Report {
    Report(
        reportID: reportID, deviceID: device, observedAt: observed, productID: product,
        originalTransactionID: original ?? transaction, transactionID: transaction, purchasedAt: purchased,
        expiresAt: expires, gracePeriodExpiresAt: grace, revokedAt: revoked, revocationReason: reason,
        isUpgraded: upgraded, willAutoRenew: autoRenew, inBillingRetry: billingRetry, environment: .production,
        signedTransaction: nil, trust: trust)
}

/// Resolves `reports` with the default catalogue.
func resolve(_ reports: [Report], at now: Date) -> AccountState {
    Resolver.resolve(reports: reports, catalogue: .default, now: now)
}

/// JSON coders using RFC 3339 with fractional seconds, as the service does.
enum WireJSON {
    static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
        }
        return encoder
    }

    static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            if let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) {
                return date
            }
            return try Date.ISO8601FormatStyle().parse(text)
        }
        return decoder
    }

    /// The top-level keys of the JSON object `data`.
    static func keys(of data: Data) throws -> Set<String> {
        let object = try JSONSerialization.jsonObject(with: data)
        return Set((object as? [String: Any])?.keys.map { $0 } ?? [])
    }

    /// The JSON object `data` as a dictionary.
    static func object(_ data: Data) throws -> [String: Any] {
        (try JSONSerialization.jsonObject(with: data) as? [String: Any]) ?? [:]
    }
}
