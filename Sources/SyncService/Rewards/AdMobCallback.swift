import Crypto
import Foundation
import SyncCore

/// One AdMob server-side verification callback (`GET /v1/rewards/admob?...`), verified.
///
/// AdMob signs the query string up to (not including) `&signature=`; `signature` (web-safe
/// base64 of a DER ECDSA P-256/SHA-256 signature) and `key_id` are the last two parameters.
/// Every value used is read from the signed part. AdMob signs every publisher's callbacks with
/// the same keys, so the ad unit must be one of ours (`SUBSYNC_ADMOB_AD_UNITS`).
/// `user_id` is the account (set by the app with `ServerSideVerificationOptions`),
/// `reward_item` names the meter and `reward_amount` the units; `transaction_id` makes the
/// grant happen once.
struct AdMobCallback: Sendable, Equatable {
    var accountID: String
    var transactionID: String
    var meter: String
    var units: Int
    var rewardedAt: Date
    var keyID: Int64
    /// `custom_data` (signed): the app's reward token (``RewardTokens``), when it passes one.
    var customData: String? = nil

    /// Why a callback is refused (each a specific 4xx; nothing is stored).
    enum Refusal: Error, Equatable {
        case malformed(String)
        case unknownKey(Int64)
        case badSignature
    }

    /// The signed part and the signature of `rawQuery` (as received, still percent-encoded), and
    /// the callback its *signed* parameters describe. The query must end with
    /// `&signature=...&key_id=...` and nothing else, so no parameter can be added after the
    /// signature and be believed.
    static func parse(rawQuery: String) throws(Refusal) -> (callback: AdMobCallback, adUnit: String, message: Data, signature: Data) {
        guard let cut = rawQuery.range(of: "&signature=", options: .backwards) else { throw .malformed("the query has no signature") }
        let signed = String(rawQuery[..<cut.lowerBound])
        let tail = parameters(String(rawQuery[cut.lowerBound...].dropFirst()))
        guard tail.count == 2, let signatureText = tail["signature"], let keyText = tail["key_id"],
            rawQuery[cut.upperBound...].split(separator: "&").count == 2
        else {
            throw .malformed("the query must end with &signature=...&key_id=... and nothing after them")
        }
        guard let signature = Self.webSafeBase64(signatureText) else { throw .malformed("signature is not web-safe base64") }
        guard let keyID = Int64(keyText) else { throw .malformed("key_id is not a number") }
        let parameters = parameters(signed)
        guard let adUnit = parameters["ad_unit"], !adUnit.isEmpty else { throw .malformed("ad_unit is missing") }
        guard let accountID = parameters["user_id"], !accountID.isEmpty else {
            throw .malformed("user_id (the account, set with ServerSideVerificationOptions) is missing")
        }
        guard let transactionID = parameters["transaction_id"], !transactionID.isEmpty, transactionID.count <= 128 else {
            throw .malformed("transaction_id is missing")
        }
        guard let meter = parameters["reward_item"], !meter.isEmpty else { throw .malformed("reward_item is missing") }
        guard let amountText = parameters["reward_amount"], let units = Int(amountText) else { throw .malformed("reward_amount is missing or not a whole number") }
        guard let timestampText = parameters["timestamp"], let milliseconds = Int64(timestampText), milliseconds > 0, milliseconds < 10_000_000_000_000 else {
            throw .malformed("timestamp is missing or not a time in milliseconds")
        }
        let callback = AdMobCallback(
            accountID: accountID, transactionID: transactionID, meter: meter, units: units,
            rewardedAt: Date(timeIntervalSince1970: Double(milliseconds) / 1000).roundedToMicroseconds, keyID: keyID,
            customData: parameters["custom_data"].flatMap { $0.isEmpty ? nil : $0 })
        return (callback, adUnit, Data(signed.utf8), signature)
    }

    /// Whether `signature` (DER) is `key`'s ECDSA P-256/SHA-256 signature of `message`.
    static func verify(message: Data, signature: Data, key: P256.Signing.PublicKey) -> Bool {
        guard let ecdsa = try? P256.Signing.ECDSASignature(derRepresentation: signature) else { return false }
        return key.isValidSignature(ecdsa, for: message)
    }

    /// The query's parameters, percent-decoded. A name given twice makes the query ambiguous: it
    /// is dropped (and the callback refused as missing it).
    static func parameters(_ rawQuery: String) -> [String: String] {
        var parameters: [String: String] = [:]
        var repeated: Set<String> = []
        for pair in rawQuery.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = parts.first.flatMap({ String($0).removingPercentEncoding }) else { continue }
            if parameters[name] != nil { repeated.insert(name) }
            parameters[name] = parts.count > 1 ? String(parts[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" : ""
        }
        for name in repeated { parameters[name] = nil }
        return parameters
    }

    static func webSafeBase64(_ text: String) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64)
    }
}
