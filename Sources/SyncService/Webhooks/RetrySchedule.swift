import Foundation

/// When to try a failed delivery again.
///
/// The default schedule, after each failed attempt: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h,
/// 14 h, 20 h (the first attempt is immediate), about three days in all, each delay with ±20 %
/// jitter so a receiver that comes back is not hit by every retry at once. After the last one
/// the delivery is dead (an operator can retry or replay it).
public struct RetrySchedule: Sendable, Equatable {
    /// Delays after failed attempts 1, 2, ...; its count is the number of retries.
    public var delays: [TimeInterval]
    /// The jitter fraction (0.2 = ±20 %).
    public var jitter: Double

    public init(delays: [TimeInterval], jitter: Double = 0.2) {
        self.delays = delays
        self.jitter = jitter
    }

    public static let standard = RetrySchedule(delays: [5, 300, 1800, 7200, 18_000, 36_000, 36_000, 50_400, 72_000])

    /// Parses `SUBSYNC_WEBHOOK_RETRY_SCHEDULE`: comma-separated seconds, e.g. `1,2,5`.
    public init(parsing text: String) throws(ConfigurationError) {
        let parts = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        var delays: [TimeInterval] = []
        for part in parts {
            guard let value = Double(part), value >= 0, value <= 7 * 86_400 else {
                throw ConfigurationError(variable: "SUBSYNC_WEBHOOK_RETRY_SCHEDULE", message: "must be comma-separated seconds (0 to 604800), got \"\(part)\"")
            }
            delays.append(value)
        }
        guard !delays.isEmpty else {
            throw ConfigurationError(variable: "SUBSYNC_WEBHOOK_RETRY_SCHEDULE", message: "must list at least one delay")
        }
        self.init(delays: delays)
    }

    /// The total number of attempts: the first plus one per delay.
    public var maximumAttempts: Int { delays.count + 1 }

    /// The delay after failed attempt number `attempt` (1-based), with jitter; nil when it was
    /// the last attempt.
    public func delay(afterAttempt attempt: Int, using generator: inout some RandomNumberGenerator) -> TimeInterval? {
        guard attempt >= 1, attempt <= delays.count else { return nil }
        let base = delays[attempt - 1]
        guard jitter > 0, base > 0 else { return base }
        return base * Double.random(in: (1 - jitter)...(1 + jitter), using: &generator)
    }

    /// The delay a `Retry-After` header asks for (seconds or an HTTP date), kept within
    /// 1 s ... 6 h so a receiver can slow us down but not stall a delivery for days.
    public static func retryAfter(_ header: String?, now: Date = Date()) -> TimeInterval? {
        guard let header = header?.trimmingCharacters(in: .whitespaces), !header.isEmpty else { return nil }
        let seconds: TimeInterval
        if let value = Double(header) {
            seconds = value
        } else if let date = httpDate(header) {
            seconds = date.timeIntervalSince(now)
        } else {
            return nil
        }
        return min(max(seconds, 1), 6 * 3600)
    }

    static func httpDate(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: text)
    }
}
