import Foundation
import SyncCore

/// Reports and answers the tests build and read.
public enum TestReports {
    public static let start = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 / 1000).rounded(.down) * 1000)

    public static func report(
        _ id: String,
        device: String = "iphone",
        transaction: String = "t1",
        product: String = "voip.premium.monthly",
        purchased: TimeInterval = -86_400,
        expires: TimeInterval? = 29 * 86_400,
        observed: TimeInterval = 0,
        revoked: TimeInterval? = nil
    ) -> Report {
        Report(
            reportID: id,
            deviceID: device,
            observedAt: start.addingTimeInterval(observed),
            productID: product,
            originalTransactionID: transaction,
            transactionID: transaction,
            purchasedAt: start.addingTimeInterval(purchased),
            expiresAt: expires.map { start.addingTimeInterval($0) },
            revokedAt: revoked.map { start.addingTimeInterval($0) },
            willAutoRenew: true
        )
    }

    public static func entitlement(_ json: [String: Any], _ id: String) -> [String: Any]? {
        let account = (json["account"] as? [String: Any]) ?? json
        return (account["entitlements"] as? [[String: Any]])?.first { $0["id"] as? String == id }
    }
}
