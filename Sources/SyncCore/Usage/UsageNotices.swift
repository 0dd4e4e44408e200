import Foundation

/// What one account's meter has told its consumers about one allowance period: the marks that
/// make the usage events fire once per crossing (stored per account, meter and period).
public struct UsagePeriodMarks: Sendable, Hashable {
    public var meter: String
    public var period: UsagePeriod
    /// `usage.low` was announced and the meter is still low.
    public var low: Bool
    /// `usage.exhausted` was announced and nothing has been added since.
    public var exhausted: Bool
    /// How many `usage.period_closed` the period has had (0: not closed yet).
    public var closedRevision: Int
    /// The totals the last `usage.period_closed` carried.
    public var closedTotals: UsageBalance.Period?
    /// The totals of the closed period changed since they were last announced, and the next
    /// announcement (the sweeper's) is due.
    public var revisionDue: Bool

    public init(
        meter: String, period: UsagePeriod, low: Bool = false, exhausted: Bool = false, closedRevision: Int = 0,
        closedTotals: UsageBalance.Period? = nil, revisionDue: Bool = false
    ) {
        self.meter = meter
        self.period = period
        self.low = low
        self.exhausted = exhausted
        self.closedRevision = closedRevision
        self.closedTotals = closedTotals
        self.revisionDue = revisionDue
    }
}

/// The usage events a meter's balance calls for (docs/USAGE.md "Events"), a pure function of the
/// balance at `now` and the marks of what was announced before:
///
/// - **`usage.period_closed`**, for every period that has ended (`end <= now`) and had usage: once
///   with its totals (revision 1), and again (revision 2, 3, ...) when the totals change
///   afterwards (an offline device's calls arriving late). Revisions are *coalesced*: an
///   evaluation that does not announce revisions (every writer's; only the sweeper's does) marks
///   the period `revisionDue` instead, so any number of late changes between two sweeps is one
///   announcement with the final totals. A period without usage closes quietly. A period that
///   was announced and is no longer in the balance (a late report moved the allowance periods)
///   is announced once more with zero totals: its usage now counts in the periods that replaced it,
///   and the last revision of every period stays its true total.
/// - **`usage.low`**, when the current period has usage, a limited allowance greater than zero
///   and `available <= floor(low_fraction × allowance)`; once, until `available` rises above
///   the threshold again (a pack bought, an upgrade), which re-arms it.
/// - **`usage.exhausted`**, when the current period has usage, a limited allowance and
///   `available == 0`: allowance, rewards and credits are all spent (more usage is overage);
///   once, until something is added again. A crossing of both in one change gives both, `low`
///   first.
///
/// Closed periods come first, in order, then the current period's thresholds. Applying the
/// returned marks and evaluating again gives nothing new: the events converge like the balance.
public enum UsageNotices {
    public struct Notice: Sendable, Hashable {
        public var type: EventType
        public var usage: UsageSnapshot
    }

    /// `announcingRevisions`: whether a closed period's changed totals are announced now (the
    /// sweeper) or marked due (every other evaluation).
    public static func evaluate(
        balance: UsageBalance, meter: Meter, currency: String?, marks: [UsagePeriod: UsagePeriodMarks], now: Date,
        announcingRevisions: Bool = true
    ) -> (notices: [Notice], marks: [UsagePeriodMarks]) {
        var notices: [Notice] = []
        var changed: [UsagePeriodMarks] = []
        let periods = Set(balance.periods.map { UsagePeriod(start: $0.start, end: $0.end) })

        // A mark whose announced totals stand again: no revision is due any more.
        func settle(_ mark: UsagePeriodMarks) {
            guard mark.revisionDue else { return }
            var settled = mark
            settled.revisionDue = false
            changed.append(settled)
        }
        // A closed period's announcement of `totals`, or (not announcing revisions) its mark due.
        func announce(_ totals: UsageBalance.Period, mark before: UsagePeriodMarks) {
            var mark = before
            // A period that ended is neither low nor exhausted any more.
            mark.low = false
            mark.exhausted = false
            if mark.closedRevision > 0 && !announcingRevisions {
                mark.revisionDue = true
                if mark != before { changed.append(mark) }
                return
            }
            mark.closedRevision += 1
            mark.closedTotals = totals
            mark.revisionDue = false
            changed.append(mark)
            var usage = UsageSnapshot(period: totals, meter: meter, currency: currency)
            usage.revision = mark.closedRevision
            notices.append(Notice(type: .usagePeriodClosed, usage: usage))
        }

        for period in balance.periods where period.end <= now {
            let key = UsagePeriod(start: period.start, end: period.end)
            // Overage without usage: units of a pack that moved away after they were spent,
            // billed in the period of the move, which must be announced like any other bill.
            guard period.used > 0 || period.overage > 0 || marks[key] != nil else { continue }
            let mark = marks[key] ?? UsagePeriodMarks(meter: meter.id, period: key)
            if mark.closedRevision > 0 && mark.closedTotals == period {
                settle(mark)
                continue
            }
            announce(period, mark: mark)
        }
        // A marked period the balance no longer has: a late report moved the allowance periods
        // (or the period was recorded by an earlier version). Announced before: announced again
        // with zero totals (its usage counts in the periods that replaced it). Never announced:
        // closed quietly once it ends, so nothing waits for it forever.
        for mark in marks.values.sorted(by: { $0.period < $1.period }) where !periods.contains(mark.period) {
            if mark.closedRevision > 0 {
                guard let totals = mark.closedTotals, totals.used > 0 || totals.overage > 0 else {
                    settle(mark)
                    continue
                }
                announce(
                    UsageBalance.Period(
                        start: totals.start, end: totals.end, allowance: totals.allowance, used: 0, fromAllowance: 0,
                        fromRewards: 0, fromCredits: 0, overage: 0),
                    mark: mark)
            } else if mark.period.end <= now {
                var closed = mark
                closed.closedRevision = 1
                changed.append(closed)
            }
        }

        if let current = balance.current, current.used > 0 || current.overage > 0 {
            let key = UsagePeriod(start: current.start, end: current.end)
            let before = marks[key] ?? UsagePeriodMarks(meter: meter.id, period: key)
            var mark = before
            if case .limited(let allowance) = current.allowance, let available = balance.available {
                // floor(low_fraction × allowance), robust to binary fractions (0.57 × 100 is
                // 56.99999... in floating point) and bounded (no trap on absurd catalogues).
                let threshold = meter.lowFraction.map { fraction in
                    Int(min(Double(allowance), max(0, (Double(allowance) * fraction + 1e-9).rounded(.down))))
                }
                let low = allowance > 0 && threshold.map { available <= $0 } ?? false
                let exhausted = available <= 0
                var snapshot = UsageSnapshot(period: current, meter: meter, currency: currency)
                snapshot.available = max(0, available)
                snapshot.rewards = balance.rewards
                snapshot.credits = balance.credits
                if low && !mark.low {
                    var usage = snapshot
                    usage.threshold = threshold
                    notices.append(Notice(type: .usageLow, usage: usage))
                }
                if exhausted && !mark.exhausted {
                    notices.append(Notice(type: .usageExhausted, usage: snapshot))
                }
                mark.low = low
                mark.exhausted = exhausted
            }
            // Written even when nothing fired: the stored period is what tells the sweeper to
            // come back and close it when it ends.
            if mark != before || marks[key] == nil { changed.append(mark) }
        }
        return (notices, changed)
    }
}
