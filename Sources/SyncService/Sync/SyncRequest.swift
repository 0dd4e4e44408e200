import Foundation
import Postgres
import SyncCore
import SyncStore

/// The body of `POST /v1/accounts/{account_id}/sync`, as sent by a device.
struct SyncRequest: Decodable, Equatable {
    var device: DeviceInfo
    var reports: [ReportPayload]
}

/// One report on the wire. `device_id` may be left out: it defaults to the request's device.
/// A report with `signed_transaction` needs only `report_id` and `observed_at` besides: the
/// transaction's fields come from the signed payload once it verifies.
struct ReportPayload: Decodable, Equatable {
    var reportID: String
    var deviceID: String?
    var observedAt: Date
    var productID: String?
    var originalTransactionID: String?
    var transactionID: String?
    var purchasedAt: Date?
    var expiresAt: Date?
    var gracePeriodExpiresAt: Date?
    var revokedAt: Date?
    var revocationReason: RevocationReason?
    var isUpgraded: Bool?
    var willAutoRenew: Bool?
    var inBillingRetry: Bool?
    var environment: StoreEnvironment?
    var signedTransaction: String?
    /// The subscription's signed renewal info, verified like `signed_transaction`.
    var signedRenewalInfo: String?
    /// Unsigned renewal details (development mode; ignored beside `signed_transaction`, whose
    /// `signed_renewal_info` is the only source of them then).
    var expirationReason: ExpirationReason?
    var renewalProductID: String?
    var priceIncreaseStatus: PriceIncreaseStatus?
    var renewalDate: Date?

    /// The same wire keys as ``Report``, so the two cannot drift apart.
    typealias CodingKeys = Report.CodingKeys

    /// The domain report as the device sent it, unverified.
    /// - Throws: the name of the first missing transaction field.
    func unverifiedReport(defaultDeviceID: String) throws(MissingField) -> Report {
        guard let productID else { throw MissingField(name: "product_id") }
        guard let originalTransactionID else { throw MissingField(name: "original_transaction_id") }
        guard let transactionID else { throw MissingField(name: "transaction_id") }
        guard let purchasedAt else { throw MissingField(name: "purchased_at") }
        return Report(
            reportID: reportID,
            deviceID: deviceID ?? defaultDeviceID,
            observedAt: observedAt,
            productID: productID,
            originalTransactionID: originalTransactionID,
            transactionID: transactionID,
            purchasedAt: purchasedAt,
            expiresAt: expiresAt,
            gracePeriodExpiresAt: gracePeriodExpiresAt,
            revokedAt: revokedAt,
            revocationReason: revocationReason,
            isUpgraded: isUpgraded ?? false,
            willAutoRenew: willAutoRenew,
            inBillingRetry: inBillingRetry ?? false,
            environment: environment,
            signedTransaction: signedTransaction,
            renewal: unsignedRenewal,
            trust: .unverifiedDevice
        )
    }

    /// The unsigned renewal details, `nil` when the report sends none.
    private var unsignedRenewal: RenewalDetails? {
        let details = RenewalDetails(
            expirationReason: expirationReason, renewalProductID: renewalProductID,
            priceIncreaseStatus: priceIncreaseStatus, renewalDate: renewalDate)
        return details.isEmpty ? nil : details
    }

    /// A transaction field an unsigned report lacks.
    struct MissingField: Error {
        var name: String
    }
}

/// Limits on what a sync request may carry.
enum SyncLimits {
    static let maximumBodyBytes = 1 << 20
    static let maximumReports = 100
    /// The default cap of `wait_ms` (`SUBSYNC_MAX_WAIT_MS`).
    static let maximumWaitMilliseconds = 5_000
    static let maximumSignedTransactionBytes = 16 * 1024
    static let maximumDeviceFieldLength = 64
}

/// Identifiers in paths and bodies: 1–128 characters of letters, digits and `._:@-`.
public enum Identifier {
    /// Account ids that are really a client bug (an unset variable serialised as text); taking
    /// them would merge unrelated users into one account.
    static let blockedAccountIDs: Set<String> = [
        "null", "nil", "none", "undefined", "nan", "anonymous", "unknown", "guest", "0", "-1",
        "[object object]", "object", "true", "false", "default", "user", "test",
    ]

    public static func isBlockedAccountID(_ text: String) -> Bool {
        blockedAccountIDs.contains(text.lowercased())
    }

    public static func isValid(_ text: String) -> Bool {
        guard (1...128).contains(text.utf8.count) else { return false }
        return text.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "-"):
                true
            default:
                false
            }
        }
    }
}

/// Free text from a client: anything printable, never a control character. A NUL would be
/// refused by PostgreSQL (a 500 and an error log per request), and newlines
/// or escape sequences would forge lines in logs and terminals.
enum TextField {
    /// - Throws: ``APIError`` 400 `invalid_request` naming the field and the character.
    static func check(_ value: String?, field: String) throws {
        guard let value, let bad = value.unicodeScalars.first(where: isControl) else { return }
        let code = String(bad.value, radix: 16, uppercase: true)
        throw APIError(
            .badRequest, code: "invalid_request",
            message: "\(field) contains a control character (U+\(String(repeating: "0", count: max(0, 4 - code.count)) + code)); nothing was stored")
    }

    /// Whether `scalar` is a control character (general category Cc): U+0000-U+001F and
    /// U+007F-U+009F, a set Unicode's stability policy fixes. Compared by value: a signed sync's
    /// 2-3 KiB JWS is read scalar by scalar, too many for the property lookup
    /// (docs/PERFORMANCE.md, *In the code*).
    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }
}

extension SyncRequest {
    /// Decodes a body and checks its shape, or throws an ``APIError`` that names the bad field.
    /// The reports become domain reports (verified or not) in ``ReportAdmission``. The common
    /// bodies are read by ``read(_:)``; `JSONDecoder` decodes the others and words the errors.
    static func decode(_ data: Data) throws -> (DeviceInfo, [ReportPayload]) {
        let request: SyncRequest
        if let read = read(data) {
            request = read
        } else {
            request = try WireBody.decode(SyncRequest.self, from: data)
        }
        let device = request.device
        try WireBody.check(device)
        guard request.reports.count <= SyncLimits.maximumReports else {
            throw APIError(.unprocessableContent, code: "too_many_reports",
                           message: "at most \(SyncLimits.maximumReports) reports per request, got \(request.reports.count)")
        }
        for (index, payload) in request.reports.enumerated() {
            for (field, value) in [
                ("report_id", payload.reportID), ("device_id", payload.deviceID), ("product_id", payload.productID),
                ("original_transaction_id", payload.originalTransactionID), ("transaction_id", payload.transactionID),
                ("signed_transaction", payload.signedTransaction), ("signed_renewal_info", payload.signedRenewalInfo),
            ] {
                try TextField.check(value, field: "reports[\(index)].\(field)")
            }
            if let prefix = ReportNamespace.reservedPrefix(of: payload.reportID) {
                throw APIError(
                    .badRequest, code: "reserved_report_id",
                    message: "reports[\(index)].report_id starts with '\(prefix)', where the service writes its own reports "
                        + "(\(ReportNamespace.reserved.joined(separator: ", "))); nothing was stored")
            }
            for (field, signed) in [("signed_transaction", payload.signedTransaction), ("signed_renewal_info", payload.signedRenewalInfo)] {
                if let signed, signed.utf8.count > SyncLimits.maximumSignedTransactionBytes {
                    throw APIError(.unprocessableContent, code: "invalid_report",
                                   message: "reports[\(index)].\(field) is larger than \(SyncLimits.maximumSignedTransactionBytes) bytes")
                }
            }
        }
        return (device, request.reports)
    }
}

extension DecodingError {
    /// A message naming the field, such as `reports[2].expires_at: expected a string`.
    var fieldMessage: String {
        func path(_ codingPath: [any CodingKey]) -> String {
            var text = ""
            for key in codingPath {
                if let index = key.intValue {
                    text += "[\(index)]"
                } else {
                    text += text.isEmpty ? key.stringValue : ".\(key.stringValue)"
                }
            }
            return text.isEmpty ? "the body" : text
        }
        switch self {
        case .typeMismatch(let type, let context):
            return "\(path(context.codingPath)): expected \(Self.jsonTypeName(type))"
        case .valueNotFound(let type, let context):
            return "\(path(context.codingPath)): must not be null (expected \(Self.jsonTypeName(type)))"
        case .keyNotFound(let key, let context):
            return "\(path(context.codingPath + [key])) is required"
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty { return "the body is not valid JSON" }
            return "\(path(context.codingPath)): \(context.debugDescription)"
        @unknown default:
            return "the body could not be read"
        }
    }

    static func jsonTypeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "a boolean"
        case is Int.Type, is Int64.Type, is Double.Type: "a number"
        case is Date.Type: "an RFC 3339 date-time string"
        default: String(describing: type).hasPrefix("Array") ? "an array" : "an object"
        }
    }
}

/// Request bodies from devices: JSON with RFC 3339 dates, and 400 `invalid_request` naming the
/// field when something is off.
enum WireBody {
    static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = RFC3339.parse(text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "expected an RFC 3339 date-time, got \"\(text.prefix(40))\"")
            }
            return date
        }
        do {
            return try decoder.decode(T.self, from: data)
        } catch let error as DecodingError {
            throw APIError(.badRequest, code: "invalid_request", message: error.fieldMessage)
        } catch {
            throw APIError(.badRequest, code: "invalid_request", message: "the body is not valid JSON")
        }
    }

    /// The `device` object every device body carries.
    static func check(_ device: DeviceInfo) throws {
        guard Identifier.isValid(device.id) else {
            throw APIError(.badRequest, code: "invalid_request", message: "device.id must be 1–128 characters of letters, digits and ._:@-")
        }
        for (field, value) in [("device.platform", device.platform), ("device.app_version", device.appVersion)] {
            if let value, value.count > SyncLimits.maximumDeviceFieldLength {
                throw APIError(.badRequest, code: "invalid_request", message: "\(field) is longer than \(SyncLimits.maximumDeviceFieldLength) characters")
            }
            try TextField.check(value, field: field)
        }
    }
}
