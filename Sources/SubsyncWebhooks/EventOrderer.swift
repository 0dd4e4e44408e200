/// Puts an app's webhook events back in order, per account, and drops repeats.
///
/// Deliveries can arrive late, twice (a retry after a lost response) or out of order (a retry
/// overtaken by the next event). Each event carries its account's ``WebhookEvent/sequence``
/// (1, 2, 3, ... with no gap), so the orderer applies an account's events strictly in sequence:
/// an event that comes early is buffered until the ones before it arrive.
///
/// ```swift
/// switch orderer.receive(delivery.event) {
/// case .ready(let events): for event in events { apply(event) }
/// case .duplicate, .stale: break          // already handled: answer 2xx
/// case .buffered: break                   // kept until the gap is filled
/// case .full: answer503()                  // too much buffered: let the sender retry it later
/// }
/// ```
///
/// **Bounded.** In gapless mode at most ``maximumBuffered`` early events are kept, and at most
/// ``maximumBufferedPerAccount`` of one account (a sender that skips a sequence for good, or a
/// flood of events numbered far ahead, cannot grow memory without end). An early event past a
/// bound is not kept: ``Outcome/full(limit:)``, which a receiver answers with a non-2xx status
/// (subsync retries the delivery on its schedule, by which time the gap may be filled) or ends
/// with ``skipGap(account:)``.
///
/// Every event carries the account's **full** resolved state (``WebhookEvent/state``), so
/// skipping a gap is safe: the state of the latest event applied is the account's correct state,
/// whatever the missing events were. ``skipGap(account:)`` gives up waiting (for instance when a
/// delivery failed for good); events of the gap that arrive later are then reported ``Outcome/stale(lastApplied:)``.
///
/// The orderer is a value type: keep one per process (for instance inside an actor) and persist
/// ``appliedSequences`` to resume with ``init(lastApplied:unknownAccountsStart:rememberedIDs:mode:maximumBuffered:maximumBufferedPerAccount:)``.
/// Buffered events are kept in memory only.
///
/// **Endpoints subscribed to some event types only** (`event_types` on the endpoint) see gaps in
/// `sequence` by design: the sequence counts every event of the account, and the events of the
/// other types are never sent to them. Use ``Mode/monotonic`` there: it applies every event
/// above the last applied at once and never waits for a gap.
public struct EventOrderer: Sendable {
    /// How gaps are treated.
    public enum Mode: Sendable, Hashable {
        /// Every sequence number is expected (an endpoint that takes every event type): an
        /// early event is buffered until the ones before it arrive.
        case gapless
        /// Gaps are expected (an endpoint filtered by event type): an event above the last
        /// applied is applied at once; anything at or below it is stale.
        case monotonic
    }

    /// Where an account the orderer knows nothing about starts.
    public enum Start: Sendable, Hashable {
        /// At sequence 1: events after a missing 1 are buffered until it arrives. For an app that
        /// has received every event from the start.
        case atOne
        /// At the first event seen: for an app that subscribes to webhooks when accounts already
        /// have events. An earlier event of the account arriving after it is reported
        /// ``Outcome/stale(lastApplied:)``.
        case atFirstSeen
    }

    /// What ``receive(_:)`` did with an event.
    public enum Outcome: Sendable, Equatable {
        /// An event with this id was seen before: ignore it.
        case duplicate
        /// The account's events up to `lastApplied` were applied already, this one included:
        /// ignore it.
        case stale(lastApplied: Int64)
        /// Apply these events, in this order: the event received, then every buffered event that
        /// now follows it without a gap.
        case ready([WebhookEvent])
        /// The event came early and is kept; the events `missing` (from the next expected
        /// sequence up to just before this one, some of which may be buffered already) must come
        /// first.
        case buffered(missing: ClosedRange<Int64>)
        /// The event came early and the buffer is full (`limit` events in all, or of this
        /// account): it was **not** kept. Answer its delivery with a non-2xx status so that it is
        /// sent again later, or give up on the gap with ``EventOrderer/skipGap(account:)``.
        case full(limit: Int)
    }

    /// The most early events kept in all (gapless mode).
    public let maximumBuffered: Int
    /// The most early events kept for one account (gapless mode).
    public let maximumBufferedPerAccount: Int
    /// Early events kept now, in all.
    public private(set) var bufferedCount = 0

    /// The last applied sequence per account.
    private var applied: [String: Int64]
    /// Events that came early, per account and sequence.
    private var pending: [String: [Int64: WebhookEvent]] = [:]
    private let unknownAccountsStart: Start
    private let mode: Mode
    /// How many event ids to remember for ``Outcome/duplicate``.
    private let idCapacity: Int
    /// The remembered ids, and their order of arrival for eviction (`idOrder[idHead...]` are live).
    private var seenIDs: Set<String> = []
    private var idOrder: [String] = []
    private var idHead = 0

    /// An orderer resuming after `lastApplied` (the last applied sequence per account, as
    /// ``appliedSequences`` returned), starting unknown accounts at `unknownAccountsStart`, and
    /// remembering the ids of the last `rememberedIDs` events to report repeats as
    /// ``Outcome/duplicate`` (older repeats are reported ``Outcome/stale(lastApplied:)``).
    ///
    /// `maximumBuffered` and `maximumBufferedPerAccount` bound the early events kept (see the
    /// type's documentation); at least 1 each.
    public init(
        lastApplied: [String: Int64] = [:], unknownAccountsStart: Start = .atOne, rememberedIDs: Int = 10_000, mode: Mode = .gapless,
        maximumBuffered: Int = 10_000, maximumBufferedPerAccount: Int = 1_000
    ) {
        self.maximumBuffered = max(1, maximumBuffered)
        self.maximumBufferedPerAccount = max(1, min(maximumBufferedPerAccount, maximumBuffered))
        self.mode = mode
        self.applied = lastApplied
        self.unknownAccountsStart = unknownAccountsStart
        self.idCapacity = max(0, rememberedIDs)
    }

    /// Takes one received event and says what to do with it.
    public mutating func receive(_ event: WebhookEvent) -> Outcome {
        if seenIDs.contains(event.id) { return .duplicate }
        let account = event.accountID
        let sequence = event.sequence
        if mode == .monotonic {
            if let last = applied[account], sequence <= last { return .stale(lastApplied: last) }
            remember(event.id)
            applied[account] = sequence
            return .ready([event])
        }

        let expected: Int64
        if let last = applied[account] {
            if sequence <= last { return .stale(lastApplied: last) }
            expected = last + 1  // cannot overflow: last < sequence
        } else if pending[account] != nil || unknownAccountsStart == .atOne {
            // Nothing applied yet: everything before 1 is "applied".
            if sequence <= 0 { return .stale(lastApplied: 0) }
            expected = 1
        } else {
            expected = sequence
        }

        if sequence == expected {
            remember(event.id)
            var ready = [event]
            var last = sequence
            // Taken out of the dictionary so that it is mutated in place, not copied.
            if var buffered = pending.removeValue(forKey: account) {
                while last < Int64.max, let next = buffered.removeValue(forKey: last + 1) {
                    ready.append(next)
                    last += 1
                    bufferedCount -= 1
                }
                if !buffered.isEmpty {
                    pending[account] = buffered
                }
            }
            applied[account] = last
            return .ready(ready)
        }

        // sequence > expected, so sequence - 1 >= expected.
        if pending[account]?[sequence] != nil {
            // The same sequence again under another id (or a repeat whose id was forgotten).
            return .duplicate
        }
        if bufferedCount >= maximumBuffered { return .full(limit: maximumBuffered) }
        if (pending[account]?.count ?? 0) >= maximumBufferedPerAccount { return .full(limit: maximumBufferedPerAccount) }
        remember(event.id)
        pending[account, default: [:]][sequence] = event
        bufferedCount += 1
        return .buffered(missing: expected...(sequence - 1))
    }

    /// The missing sequences that hold back each account with buffered events: from the next
    /// expected sequence to just before the first buffered one.
    public func gaps() -> [String: ClosedRange<Int64>] {
        var result: [String: ClosedRange<Int64>] = [:]
        for (account, buffered) in pending {
            guard let first = buffered.keys.min() else { continue }
            let expected = (applied[account] ?? 0) + 1
            if expected < first {
                result[account] = expected...(first - 1)
            }
        }
        return result
    }

    /// Gives up waiting for `account`'s missing events: applies every buffered event of the
    /// account in sequence order, jumping over the holes, and returns them (empty when nothing
    /// is buffered). Missing events that arrive later are reported ``Outcome/stale(lastApplied:)``.
    ///
    /// Safe because every event carries the account's full state: after this, the state of the
    /// last event returned is the account's state.
    public mutating func skipGap(account: String) -> [WebhookEvent] {
        guard let buffered = pending.removeValue(forKey: account) else { return [] }
        bufferedCount -= buffered.count
        let events = buffered.keys.sorted().compactMap { buffered[$0] }
        if let last = events.last {
            applied[account] = max(applied[account] ?? last.sequence, last.sequence)
        }
        return events
    }

    /// The last sequence applied for `account`; `nil` when none was.
    public func lastApplied(account: String) -> Int64? {
        applied[account]
    }

    /// The last applied sequence of every account: persist it and pass it to
    /// ``init(lastApplied:unknownAccountsStart:rememberedIDs:mode:maximumBuffered:maximumBufferedPerAccount:)`` to resume.
    public var appliedSequences: [String: Int64] { applied }

    /// Remembers `id` for duplicate detection, forgetting the oldest beyond the capacity.
    private mutating func remember(_ id: String) {
        guard idCapacity > 0, seenIDs.insert(id).inserted else { return }
        idOrder.append(id)
        while idOrder.count - idHead > idCapacity {
            seenIDs.remove(idOrder[idHead])
            idHead += 1
        }
        // Compact now and then so that the order array does not grow without bound.
        if idHead >= 1_024, idHead * 2 >= idOrder.count {
            idOrder.removeFirst(idHead)
            idHead = 0
        }
    }
}
