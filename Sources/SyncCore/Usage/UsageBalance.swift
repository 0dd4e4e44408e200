import Foundation

/// The balance of one meter of one account: a pure function of the *set* of its ledger entries
/// and the time (the rule in full: docs/USAGE.md, "The balance").
///
/// 1. Entries are a set by id (a duplicate counts once; of two different entries claiming one
///    id, the greater by a fixed total order is taken, so even that cannot depend on order).
/// 2. Allowance periods are the distinct `[start, end)` of the allowance entries; a period's
///    allowance is the **largest** of its entries (unlimited above all): an upgrade mid-period
///    adds the new tier's entry for the same period, so the rest of the period has the new
///    allowance, and a downgrade waits for the next period.
/// 3. A usage belongs to the period that contains its time and started last (a subscription
///    bought on the 14th starts a period that takes over from the calendar month it began in).
///    Usage in no period counts against an allowance of 0, after every period.
/// 4. Periods are taken in order (start, then end). Rewards and credits are pools carried from
///    period to period; a grant joins the pools of the first period that ends after it. Each
///    period's usage is spent from its **allowance first, then rewards, then credits**; what is
///    left is that period's **overage**. Debits (refunds of consumables, negative operator
///    adjustments) are taken from the credit pool *after* the period's usage, so a refunded pack
///    takes its units back even when they were spent: the credit pool can be negative, is never
///    spent from then, and is repaid by later credits.
/// 5. A pack that moved to another account (``UsageSums/transfers``) takes from the credit pool,
///    after the debits, what the pool still has of it (never below zero); the rest of its units
///    were spent here and are **reclaimed**: billed as that period's overage. So moving a pack
///    never mints units: it leaves `overage − credits` exactly as if the pack had never been here,
///    and the move itself never takes the credit pool below zero.
public struct UsageBalance: Sendable, Hashable, Codable {
    /// One allowance period's totals.
    public struct Period: Sendable, Hashable, Codable {
        public var start: Date
        public var end: Date
        public var allowance: LimitValue
        /// Units used in the period (every usage entry that belongs to it).
        public var used: Int
        public var fromAllowance: Int
        public var fromRewards: Int
        public var fromCredits: Int
        /// Units billed: those used beyond allowance, rewards and credits, plus ``reclaimed``.
        public var overage: Int
        /// Units of packs that moved to another account in this period after they were spent
        /// here (part of ``overage``): `used + reclaimed = fromAllowance + fromRewards +
        /// fromCredits + overage`.
        public var reclaimed: Int

        /// What is left of the allowance (`nil`: unlimited).
        public var allowanceLeft: Int? {
            switch allowance {
            case .limited(let units): units - fromAllowance
            case .unlimited: nil
            }
        }

        enum CodingKeys: String, CodingKey {
            case start, end, allowance, used
            case fromAllowance = "from_allowance"
            case fromRewards = "from_rewards"
            case fromCredits = "from_credits"
            case overage, reclaimed
        }

        /// Decodes a period; one stored before `reclaimed` existed (sql/0042) reclaimed none.
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            start = try c.decode(Date.self, forKey: .start)
            end = try c.decode(Date.self, forKey: .end)
            allowance = try c.decode(LimitValue.self, forKey: .allowance)
            used = try c.decode(Int.self, forKey: .used)
            fromAllowance = try c.decode(Int.self, forKey: .fromAllowance)
            fromRewards = try c.decode(Int.self, forKey: .fromRewards)
            fromCredits = try c.decode(Int.self, forKey: .fromCredits)
            overage = try c.decode(Int.self, forKey: .overage)
            reclaimed = try c.decodeIfPresent(Int.self, forKey: .reclaimed) ?? 0
        }

        public init(
            start: Date, end: Date, allowance: LimitValue, used: Int, fromAllowance: Int, fromRewards: Int, fromCredits: Int,
            overage: Int, reclaimed: Int = 0
        ) {
            self.start = start
            self.end = end
            self.allowance = allowance
            self.used = used
            self.fromAllowance = fromAllowance
            self.fromRewards = fromRewards
            self.fromCredits = fromCredits
            self.overage = overage
            self.reclaimed = reclaimed
        }
    }

    public var meter: String
    /// Every period, in order.
    public var periods: [Period]
    /// The period containing the time of the balance (the one that started last), if any.
    public var current: Period?
    /// Usage outside every period (spent after them from what the pools had left).
    public var unallocated: Period?
    /// Rewarded units left.
    public var rewards: Int
    /// Credited units left; negative when refunds took back units that were already spent.
    public var credits: Int
    /// Units that may still be spent now: what is left of the current allowance, plus rewards,
    /// plus credits if positive; `nil` when the current allowance is unlimited.
    public var available: Int?

    enum CodingKeys: String, CodingKey {
        case meter, periods, current, unallocated, rewards, credits, available
    }

    /// The balance of `meter` from `entries` (entries of other meters are ignored) at `now`:
    /// the entries are summed per period (``UsageSums``), then ``settle(meter:periods:unallocatedUse:trailing:now:)``
    /// applies the spending rule, which the store runs on its stored per-period totals too.
    public static func compute(meter: String, entries: some Sequence<UsageEntry>, now: Date) -> UsageBalance {
        // 1. A set by id.
        var byID: [String: UsageEntry] = [:]
        for entry in entries where entry.meter == meter {
            if let existing = byID[entry.id], !UsageEntry.precedes(existing, entry) { continue }
            byID[entry.id] = entry
        }

        // 2. Periods and their allowances.
        var allowanceByPeriod: [UsagePeriod: LimitValue] = [:]
        for entry in byID.values where entry.kind == .allowance {
            guard let end = entry.periodEnd, end > entry.at else { continue }
            let period = UsagePeriod(start: entry.at, end: end)
            let units: LimitValue = entry.units.map { .limited(max(0, $0)) } ?? .unlimited
            allowanceByPeriod[period] = max(allowanceByPeriod[period] ?? .limited(0), units)
        }
        let periods = allowanceByPeriod.keys.sorted()

        // 3. Sums per period: a usage in the period that contains it and started last; a grant or
        // debit in the first period (in order) that ends after it.
        var sums = [UsageSums](repeating: UsageSums(), count: periods.count)
        var unallocatedUse = 0
        var trailing = UsageSums()
        for entry in byID.values where entry.kind != .allowance {
            if entry.kind == .usage {
                if let index = owningPeriod(of: entry.at, in: periods) {
                    sums[index].add(entry)
                } else {
                    unallocatedUse += max(0, entry.units ?? 0)
                }
            } else if let index = periods.firstIndex(where: { entry.at < $0.end }) {
                sums[index].add(entry)
            } else {
                trailing.add(entry)
            }
        }
        return settle(
            meter: meter,
            periods: periods.indices.map { PeriodSums(period: periods[$0], allowance: allowanceByPeriod[periods[$0]] ?? .limited(0), sums: sums[$0]) },
            unallocatedUse: unallocatedUse, trailing: trailing, now: now)
    }

    /// One period with its allowance and the sums of its entries.
    public struct PeriodSums: Sendable, Hashable {
        public var period: UsagePeriod
        public var allowance: LimitValue
        public var sums: UsageSums

        public init(period: UsagePeriod, allowance: LimitValue, sums: UsageSums) {
            self.period = period
            self.allowance = allowance
            self.sums = sums
        }
    }

    /// The spending rule over a timeline (periods laid end to end, as ``UsageTimeline`` gives
    /// them) with the sums of the entries in each period, before the first (`before`) and from the
    /// end of the last (`after`): grants before the first period join its pools, and usage outside
    /// every period is spent after them all, as ``compute(meter:entries:now:)`` places them.
    public static func settle(meter: String, timeline: [PeriodSums], before: UsageSums, after: UsageSums, now: Date) -> UsageBalance {
        var periods = timeline
        var trailing = UsageSums(rewards: after.rewards, credits: after.credits, debits: after.debits, transfers: after.transfers)
        let early = UsageSums(rewards: before.rewards, credits: before.credits, debits: before.debits, transfers: before.transfers)
        if periods.isEmpty { trailing = trailing + early } else { periods[0].sums = periods[0].sums + early }
        return settle(meter: meter, periods: periods, unallocatedUse: before.used + after.used, trailing: trailing, now: now)
    }

    /// The spending rule (4. and 5. above) over periods given with the sums of their entries,
    /// sorted by (start, end): each period's rewards and credits join the pools, its usage is
    /// spent from its allowance, then rewards, then credits, the rest is overage, then its debits
    /// are taken from the credit pool. `unallocatedUse` (usage in no period) is spent after every
    /// period, after the `trailing` grants (those after every period) and before their debits.
    public static func settle(
        meter: String, periods: [PeriodSums], unallocatedUse: Int, trailing: UsageSums, now: Date
    ) -> UsageBalance {
        var rewards = 0
        var credits = 0
        func spend(_ used: Int, allowance: LimitValue, period: UsagePeriod) -> Period {
            let fromAllowance = switch allowance {
            case .limited(let units): min(used, units)
            case .unlimited: used
            }
            var rest = used - fromAllowance
            let fromRewards = min(rest, max(0, rewards))
            rewards -= fromRewards
            rest -= fromRewards
            let fromCredits = min(rest, max(0, credits))
            credits -= fromCredits
            rest -= fromCredits
            return Period(
                start: period.start, end: period.end, allowance: allowance, used: used, fromAllowance: fromAllowance,
                fromRewards: fromRewards, fromCredits: fromCredits, overage: rest)
        }

        /// Takes the units of packs that moved away from the credit pool, as far as it has them;
        /// the rest is reclaimed (rule 5).
        func reclaim(_ transfers: Int, into period: inout Period) {
            let present = min(transfers, max(0, credits))
            credits -= present
            period.reclaimed += transfers - present
            period.overage += transfers - present
        }

        var results: [Period] = []
        results.reserveCapacity(periods.count)
        for period in periods {
            rewards += period.sums.rewards
            credits += period.sums.credits
            var result = spend(period.sums.used, allowance: period.allowance, period: period.period)
            credits -= period.sums.debits
            reclaim(period.sums.transfers, into: &result)
            results.append(result)
        }
        rewards += trailing.rewards
        credits += trailing.credits
        var unallocated: Period?
        if unallocatedUse > 0 {
            unallocated = spend(unallocatedUse, allowance: .limited(0), period: UsagePeriod(start: now, end: now))
        }
        credits -= trailing.debits
        if trailing.transfers > 0 {
            var after = unallocated ?? spend(0, allowance: .limited(0), period: UsagePeriod(start: now, end: now))
            reclaim(trailing.transfers, into: &after)
            if after.reclaimed > 0 || unallocated != nil { unallocated = after }
        }

        let current = owningPeriod(of: now, in: periods.map(\.period)).map { results[$0] }
        let allowanceLeft: Int? = current.map { $0.allowanceLeft } ?? 0
        return UsageBalance(
            meter: meter, periods: results, current: current, unallocated: unallocated, rewards: rewards, credits: credits,
            available: allowanceLeft.map { $0 + rewards + max(0, credits) })
    }

    /// The index of the period that contains `date` and started last (then ended last).
    public static func owningPeriod(of date: Date, in periods: [UsagePeriod]) -> Int? {
        // Sorted by (start, end): the last one containing `date` is the owner.
        periods.lastIndex { $0.contains(date) }
    }
}
