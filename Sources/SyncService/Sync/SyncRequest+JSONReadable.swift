import Foundation
import Postgres
import SyncCore
import SyncStore

/// The sync body read with ``JSONReader`` instead of Foundation's `JSONDecoder`, a large share
/// of `serve`'s CPU on every sync (docs/PERFORMANCE.md, *In the code*).
///
/// Only for the bodies where the two cannot differ: ASCII bytes (so no invalid UTF-8 to judge),
/// members that the types know and nothing else, each value of the JSON type its field takes.
/// Anything else (an unknown member, a number for `revocation_reason`, a date
/// ``RFC3339/parse(_:)`` refuses, a key twice, malformed JSON) makes ``read(_:)`` return nil,
/// and ``SyncRequest/decode(_:)`` decodes with `JSONDecoder` as before: the same value, or the
/// same 400 naming the field. `SyncBodyReaderTests` compares the two on generated bodies.
extension SyncRequest: JSONReadable {
    /// The body, if the reader takes it.
    static func read(_ data: Data) -> SyncRequest? {
        data.withUnsafeBytes { raw -> SyncRequest? in
            let bytes = raw.bindMemory(to: UInt8.self)
            guard !bytes.contains(where: { $0 >= 0x80 }) else { return nil }
            return try? JSONReader.read(SyncRequest.self, from: bytes)
        }
    }

    init(json reader: inout JSONReader) throws {
        var device: DeviceInfo?
        var reports: [ReportPayload]?
        try reader.object { reader, key in
            if key == "device" {
                device = try DeviceInfo(wire: &reader)
            } else if key == "reports" {
                reports = try [ReportPayload](json: &reader)
            } else {
                throw reader.error("a member the reader leaves to JSONDecoder")
            }
        }
        guard let device, let reports else { throw reader.error("device or reports missing") }
        self.init(device: device, reports: reports)
    }
}

extension DeviceInfo {
    /// The `device` object of a body (``SyncRequest/init(json:)``).
    init(wire reader: inout JSONReader) throws {
        var id: String?
        var platform: String?
        var appVersion: String?
        try reader.object { reader, key in
            if key == "id" {
                id = try reader.string()
            } else if key == "platform" {
                platform = reader.null() ? nil : try reader.string()
            } else if key == "app_version" {
                appVersion = reader.null() ? nil : try reader.string()
            } else {
                throw reader.error("a member the reader leaves to JSONDecoder")
            }
        }
        guard let id else { throw reader.error("device.id missing") }
        self.init(id: id, platform: platform, appVersion: appVersion)
    }
}

extension ReportPayload: JSONReadable {
    init(json reader: inout JSONReader) throws {
        var reportID: String?
        var observedAt: Date?
        var payload = ReportPayload(reportID: "", observedAt: .distantPast)
        try reader.object { reader, key in
            func text() throws -> String? { reader.null() ? nil : try reader.string() }
            func date() throws -> Date? { reader.null() ? nil : try reader.date() }
            func flag() throws -> Bool? { reader.null() ? nil : try reader.bool() }
            if key == "report_id" {
                reportID = try reader.string()
            } else if key == "observed_at" {
                observedAt = try reader.date()
            } else if key == "device_id" {
                payload.deviceID = try text()
            } else if key == "product_id" {
                payload.productID = try text()
            } else if key == "original_transaction_id" {
                payload.originalTransactionID = try text()
            } else if key == "transaction_id" {
                payload.transactionID = try text()
            } else if key == "purchased_at" {
                payload.purchasedAt = try date()
            } else if key == "expires_at" {
                payload.expiresAt = try date()
            } else if key == "grace_period_expires_at" {
                payload.gracePeriodExpiresAt = try date()
            } else if key == "revoked_at" {
                payload.revokedAt = try date()
            } else if key == "revocation_reason" {
                // StoreKit's numeric codes are JSONDecoder's (RevocationReason.init(from:)).
                payload.revocationReason = reader.null() ? nil : try RevocationReason(json: &reader)
            } else if key == "is_upgraded" {
                payload.isUpgraded = try flag()
            } else if key == "will_auto_renew" {
                payload.willAutoRenew = try flag()
            } else if key == "in_billing_retry" {
                payload.inBillingRetry = try flag()
            } else if key == "environment" {
                payload.environment = reader.null() ? nil : try StoreEnvironment(json: &reader)
            } else if key == "signed_transaction" {
                payload.signedTransaction = try text()
            } else if key == "signed_renewal_info" {
                payload.signedRenewalInfo = try text()
            } else if key == "expiration_reason" {
                // StoreKit's numeric codes are JSONDecoder's (ExpirationReason.init(from:)).
                payload.expirationReason = reader.null() ? nil : try ExpirationReason(json: &reader)
            } else if key == "renewal_product_id" {
                payload.renewalProductID = try text()
            } else if key == "price_increase_status" {
                payload.priceIncreaseStatus = reader.null() ? nil : try PriceIncreaseStatus(json: &reader)
            } else if key == "renewal_date" {
                payload.renewalDate = try date()
            } else {
                throw reader.error("a member the reader leaves to JSONDecoder")
            }
        }
        guard let reportID, let observedAt else { throw reader.error("report_id or observed_at missing") }
        payload.reportID = reportID
        payload.observedAt = observedAt
        self = payload
    }
}
