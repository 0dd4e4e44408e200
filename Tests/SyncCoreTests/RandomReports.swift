import Foundation
import SyncCore

/// Turns generated numbers into random but meaningful report sets over a few transactions:
/// all product kinds and unknown products, revocations, verified snapshots, store reports, admin
/// revoke/unrevoke, upgrades, grace periods, billing retry, and renewal details signed or not
/// (signing times on the day grid too, so that they tie). Dates lie on a coarse day grid so
/// that ties (same observed_at, same expiry) happen often.
enum RandomReports {
    static let transactionCount = 5
    static let base = utc(2025, 1, 1)
    static let productPool: [String] = [
        ProductID.basicMonthly, ProductID.premiumYearly, ProductID.businessMonthly,
        ProductID.basicPass3M, ProductID.premiumPass3M, ProductID.premiumPass6M,
        ProductID.premiumLifetime, ProductID.credits, ProductID.unknown,
    ]
    /// Instants at which properties compare resolved states.
    static let probeTimes: [Date] = [0, 10, 25, 40, 60, 90, 150, 300, 800].map { day($0) }

    static func day(_ n: Int) -> Date { base.addingTimeInterval(Double(n) * 86_400) }

    /// The product of each transaction, from generated pool indices.
    static func products(_ indices: [Int]) -> [String] {
        (0..<transactionCount).map { productPool[indices[$0 % max(indices.count, 1)] % productPool.count] }
    }

    /// One report decoded from the bits of `spec`. Equal specs give equal reports (same id).
    static func report(_ spec: UInt64, products: [String]) -> Report {
        func bits(_ shift: UInt64, _ modulus: UInt64) -> Int { Int((spec >> shift) % modulus) }
        let transaction = bits(0, UInt64(transactionCount))
        let purchased = day(transaction * 20 + bits(44, 3))
        let expires: Date? = bits(11, 4) == 0 ? nil : purchased.addingTimeInterval(Double(bits(11, 4) * 15) * 86_400)
        let grace: Date? = (bits(13, 4) == 0) ? expires?.addingTimeInterval(10 * 86_400) : nil
        let revoked: Date? = bits(15, 5) == 0 ? purchased.addingTimeInterval(Double(bits(18, 40)) * 86_400) : nil
        let autoRenew: Bool? = [nil, true, false][bits(27, 3)]
        let signed = day(bits(34, 64))
        let trust: ReportTrust
        switch bits(31, 8) {
        case 0...3: trust = ReportTrust(source: .device, isVerified: false, signedDate: bits(46, 2) == 0 ? signed : nil)
        case 4, 5: trust = .verified(signedDate: signed)
        case 6: trust = .verified(signedDate: signed, source: .store)
        default: trust = .admin(bits(40, 2) == 0 ? .revoke : .unrevoke, at: signed)
        }
        let renewal: RenewalDetails?
        switch bits(50, 4) {
        case 0, 1: renewal = nil
        default:
            renewal = RenewalDetails(
                expirationReason: bits(58, 6) == 0 ? nil : ExpirationReason(intent: bits(58, 6)),
                renewalProductID: bits(52, 3) == 0 ? nil : products[bits(52, 3) % products.count],
                priceIncreaseStatus: PriceIncreaseStatus(code: bits(55, 3)),
                renewalDate: bits(60, 2) == 0 ? nil : day(bits(60, 16) * 10),
                signedAt: bits(50, 4) == 2 ? nil : day(bits(53, 8)))
        }
        return Report(
            reportID: "r\(spec)", deviceID: "device\(bits(3, 3))", observedAt: day(bits(5, 64)),
            productID: products[transaction], originalTransactionID: "o\(transaction % 3)",
            transactionID: "t\(transaction)", purchasedAt: purchased, expiresAt: expires,
            gracePeriodExpiresAt: grace, revokedAt: revoked,
            revocationReason: revoked == nil ? nil : (bits(48, 2) == 0 ? .other : .developerIssue),
            isUpgraded: bits(24, 8) == 0, willAutoRenew: autoRenew, inBillingRetry: bits(29, 4) == 0,
            environment: [StoreEnvironment.production, .sandbox, .xcode][bits(41, 3)],
            signedTransaction: nil, renewal: renewal, trust: trust)
    }

    static func reports(_ specs: [UInt64], products: [String]) -> [Report] {
        specs.map { report($0, products: products) }
    }
}
