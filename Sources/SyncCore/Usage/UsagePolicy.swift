import Foundation

/// How far back usage may be dated and how much one account may record (docs/USAGE.md, "Late
/// usage" and "Bounds"): an operator's settings, the same for every meter.
public struct UsagePolicy: Sendable, Equatable {
    /// How late usage may be reported (calls made while a device was offline): entries dated
    /// earlier than `now - lateWindow` are refused (`SUBSYNC_USAGE_LATE_WINDOW_HOURS`, default
    /// 90 days). An app without offline calling can shorten it to hours.
    public var lateWindow: TimeInterval
    /// The most recorded entries (usage, grants, adjustments) one account may have in one
    /// allowance period of one meter (`SUBSYNC_USAGE_MAX_ENTRIES_PER_PERIOD`, default 100,000:
    /// a call centre's month): a batch that would pass it is refused whole, `422 period_full`.
    public var maximumEntriesPerPeriod: Int
    /// The most open holds one account may have on one meter at once
    /// (`SUBSYNC_USAGE_MAX_OPEN_HOLDS`, default 100): a new hold past it is `429 too_many_holds`.
    public var maximumOpenHolds: Int

    public init(
        lateWindow: TimeInterval = UsagePolicy.defaultLateWindow, maximumEntriesPerPeriod: Int = 100_000, maximumOpenHolds: Int = 100
    ) {
        self.lateWindow = lateWindow
        self.maximumEntriesPerPeriod = maximumEntriesPerPeriod
        self.maximumOpenHolds = maximumOpenHolds
    }

    public static let defaultLateWindow: TimeInterval = 90 * 86_400
    /// The longest late window an operator may set (the default).
    public static let maximumLateWindow: TimeInterval = 90 * 86_400

    /// How far a device's clock may run ahead of the service's, and how far before its first
    /// contact with the service a device may date usage (the same allowance for clocks that
    /// disagree by a few minutes).
    public static let clockSkew: TimeInterval = 5 * 60

    /// How long after its end a period becomes **final** (docs/USAGE.md, "Final periods"): its
    /// allowance, tier and totals are stored and never derived again, whatever is reported later.
    /// The longest late window, whatever the operator's setting, so that every process agrees on
    /// which periods are final and a late App Store fact (a refund, a purchase reported weeks
    /// later) still moves the periods that usage can still be dated in.
    public static let finalAfter: TimeInterval = maximumLateWindow

    /// Whether `period` is final at `now` (it ended ``finalAfter`` or more before).
    public static func isFinal(_ period: UsagePeriod, at now: Date) -> Bool {
        period.end <= now.addingTimeInterval(-finalAfter)
    }

    public static let `default` = UsagePolicy()
}
