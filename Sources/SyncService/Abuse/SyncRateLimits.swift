import Logging
import SyncCore
import SyncStore

/// The limits a device's sync request meets (docs/SECURITY.md, "Rate limits"): per account and
/// per device, the daily report quota, and the same buckets shared by every process. Admin
/// callers (the app's backend) are not limited.
struct SyncRateLimits: Sendable {
    let account: RateLimiter?
    let device: RateLimiter?
    /// Reports per account per day (each report costs one token).
    let reportQuota: RateLimiter?
    /// The same limits in PostgreSQL, shared by every process (nil: per process only).
    let shared: RateBuckets?
    let clock: any ServiceClock

    init(account: RateLimiter?, device: RateLimiter?, reportQuota: RateLimiter?, shared: RateBuckets?, clock: any ServiceClock) {
        self.account = account
        self.device = device
        self.reportQuota = reportQuota
        self.shared = shared
        self.clock = clock
    }

    /// Before the body is read: the account's own bucket in this process.
    func checkAccount(_ accountID: String) async throws {
        try await check(account, key: accountID, what: "account")
    }

    /// Once the body names the device and counts the reports: the device's bucket, the quota,
    /// then the buckets every process shares.
    func checkReports(accountID: String, deviceID: String, reports: Int) async throws {
        try await check(device, key: accountID + "\u{0}" + deviceID, what: "device")
        if let reportQuota, let wait = await reportQuota.take(accountID, cost: Double(reports)) {
            ServiceMetrics.reportQuotaRefused.increment()
            throw APIError.rateLimited(retryAfter: wait, what: "this account today (SUBSYNC_REPORTS_PER_ACCOUNT_PER_DAY)")
        }
        if let shared {
            try await checkShared(shared, accountID: accountID, deviceID: deviceID, reports: reports)
        }
    }

    /// 429 with Retry-After when the caller's bucket is empty.
    private func check(_ limiter: RateLimiter?, key: String, what: String) async throws {
        guard let limiter, let wait = await limiter.take(key) else { return }
        throw APIError.rateLimited(retryAfter: wait, what: "this \(what)")
    }

    /// The account, device and quota buckets every process shares, in one statement, after this
    /// process's own buckets let the request through: 429 with the longest wait when any is empty.
    private func checkShared(_ shared: RateBuckets, accountID: String, deviceID: String, reports: Int) async throws {
        var asks: [(ask: RateBuckets.Ask, what: String)] = []
        if let limit = account?.limit {
            asks.append((.init(key: "account/" + accountID, ratePerSecond: limit.ratePerSecond, burst: limit.burst), "this account"))
        }
        if let limit = device?.limit {
            asks.append((.init(key: "device/" + accountID + "/" + deviceID, ratePerSecond: limit.ratePerSecond, burst: limit.burst), "this device"))
        }
        if let limit = reportQuota?.limit, reports > 0 {
            asks.append((.init(key: "quota/" + accountID, ratePerSecond: limit.ratePerSecond, burst: limit.burst, cost: Double(reports)),
                         "this account today (SUBSYNC_REPORTS_PER_ACCOUNT_PER_DAY)"))
        }
        let refused = try await shared.take(asks.map(\.ask), now: clock.now())
        guard !refused.isEmpty else { return }
        let first = asks.first { refused[$0.ask.key] != nil }
        if first?.ask.key.hasPrefix("quota") == true { ServiceMetrics.reportQuotaRefused.increment() }
        throw APIError.rateLimited(retryAfter: refused.values.max() ?? .seconds(1), what: first?.what ?? "this account")
    }
}
