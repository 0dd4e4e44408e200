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

    /// Random reports for `accounts` accounts: several devices, renewals, stale reports, refunds.
    public static func randomReports(accounts: Int, perAccount: Int, seed: UInt64) -> [(account: String, device: String, report: Report)] {
        var generator = SeededGenerator(seed: seed)
        let products = ["voip.basic.monthly", "voip.premium.monthly", "voip.business.yearly", "voip.premium.3months", "voip.unknown"]
        let base = TestReports.start.addingTimeInterval(-40 * 86_400)
        var result: [(String, String, Report)] = []
        for account in 0..<accounts {
            for index in 0..<perAccount {
                let transaction = Int(generator.next() % 4)
                let device = "device-\(generator.next() % 3)"
                let purchased = base.addingTimeInterval(Double(transaction) * 15 * 86_400)
                let expiry = purchased.addingTimeInterval(Double(20 + Int(generator.next() % 20)) * 86_400)
                let revoked = generator.next() % 12 == 0 ? purchased.addingTimeInterval(86_400) : nil
                let report = Report(
                    reportID: "a\(account)-r\(index)",
                    deviceID: device,
                    observedAt: purchased.addingTimeInterval(Double(generator.next() % 1000) * 60),
                    productID: products[Int(generator.next() % UInt64(products.count))],
                    originalTransactionID: "a\(account)-t\(transaction)",
                    transactionID: "a\(account)-t\(transaction)",
                    purchasedAt: purchased,
                    expiresAt: expiry,
                    revokedAt: revoked,
                    willAutoRenew: generator.next() % 2 == 0
                )
                result.append(("acct-\(account)", device, report))
            }
        }
        return result
    }
}
