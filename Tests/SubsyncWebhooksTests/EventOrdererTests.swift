import Foundation
import SubsyncWebhooks
import Testing

/// SplitMix64: a tiny seeded generator, so that every random case can be replayed.
struct OrdererRandom: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite("EventOrderer")
struct EventOrdererTests {
    @Test("Random arrival orders with repeats give each account 1...n in order, each once")
    func randomArrivals() {
        let accounts = ["acct_a", "acct_b", "acct_c"]
        for seed in 0..<300 {
            var random = OrdererRandom(seed: UInt64(seed))
            var counts: [String: Int64] = [:]
            var deliveries: [WebhookEvent] = []
            var copies = 0
            for account in accounts {
                let n = Int64.random(in: 0...25, using: &random)
                counts[account] = n
                for sequence in stride(from: Int64(1), through: n, by: 1) {
                    let original = makeEvent(account, sequence)
                    deliveries.append(original)
                    // About one delivery in five is repeated once or twice (retries).
                    if Int.random(in: 0..<5, using: &random) == 0 {
                        let repeats = Int.random(in: 1...2, using: &random)
                        for _ in 0..<repeats {
                            deliveries.append(original)
                            copies += 1
                        }
                    }
                }
            }
            deliveries.shuffle(using: &random)

            var orderer = EventOrderer()
            var applied: [String: [Int64]] = [:]
            var received: Set<String> = []
            var duplicates = 0
            for delivery in deliveries {
                let repeated = !received.insert(delivery.id).inserted
                let outcome = orderer.receive(delivery)
                switch outcome {
                case .duplicate:
                    duplicates += 1
                    #expect(repeated, "seed \(seed): the first delivery of \(delivery.id) was called a duplicate")
                case .stale(let last):
                    Issue.record("seed \(seed): \(delivery.id) was called stale after \(last)")
                case .ready(let events):
                    #expect(!repeated, "seed \(seed): a repeat of \(delivery.id) was applied")
                    #expect(events.first == delivery)
                    for event in events {
                        #expect(event.accountID == delivery.accountID)
                        applied[event.accountID, default: []].append(event.sequence)
                    }
                case .full(let limit):
                    Issue.record("seed \(seed): the buffer (\(limit)) filled")
                case .buffered(let missing):
                    #expect(!repeated, "seed \(seed): a repeat of \(delivery.id) was buffered")
                    let next = (orderer.lastApplied(account: delivery.accountID) ?? 0) + 1
                    #expect(missing.lowerBound == next)
                    #expect(missing.upperBound == delivery.sequence - 1)
                }
            }

            #expect(duplicates == copies, "seed \(seed)")
            for account in accounts {
                let n = counts[account] ?? 0
                let expected = Array(stride(from: Int64(1), through: n, by: 1))
                #expect(applied[account, default: []] == expected, "seed \(seed), \(account)")
                let expectedLast: Int64? = n > 0 ? n : nil
                #expect(orderer.lastApplied(account: account) == expectedLast, "seed \(seed), \(account)")
            }
            #expect(orderer.gaps().isEmpty, "seed \(seed)")
        }
    }

    @Test("Monotonic mode (an endpoint filtered by event type) applies anything above the last applied at once")
    func monotonicAppliesAcrossGaps() {
        var orderer = EventOrderer(mode: .monotonic)
        #expect(orderer.receive(makeEvent("a", 3)) == .ready([makeEvent("a", 3)]))
        #expect(orderer.receive(makeEvent("a", 7)) == .ready([makeEvent("a", 7)]))
        #expect(orderer.receive(makeEvent("a", 7)) == .duplicate)
        #expect(orderer.receive(makeEvent("a", 5)) == .stale(lastApplied: 7))
        #expect(orderer.gaps().isEmpty)
        #expect(orderer.lastApplied(account: "a") == 7)
    }

    @Test("A gap is reported, then filled")
    func gapFilled() {
        var orderer = EventOrderer()
        let first = orderer.receive(makeEvent("a", 1))
        #expect(first == .ready([makeEvent("a", 1)]))

        let early = orderer.receive(makeEvent("a", 4))
        #expect(early == .buffered(missing: 2...3))
        let gapsAfterFour: [String: ClosedRange<Int64>] = ["a": 2...3]
        #expect(orderer.gaps() == gapsAfterFour)

        let lessEarly = orderer.receive(makeEvent("a", 3))
        #expect(lessEarly == .buffered(missing: 2...2))
        let gapsAfterThree: [String: ClosedRange<Int64>] = ["a": 2...2]
        #expect(orderer.gaps() == gapsAfterThree)
        #expect(orderer.lastApplied(account: "a") == 1)

        let filler = orderer.receive(makeEvent("a", 2))
        #expect(filler == .ready([makeEvent("a", 2), makeEvent("a", 3), makeEvent("a", 4)]))
        #expect(orderer.gaps().isEmpty)
        #expect(orderer.lastApplied(account: "a") == 4)

        let next = orderer.receive(makeEvent("a", 5))
        #expect(next == .ready([makeEvent("a", 5)]))
    }

    @Test("Accounts are ordered independently")
    func independentAccounts() {
        var orderer = EventOrderer()
        let b2 = orderer.receive(makeEvent("b", 2))
        #expect(b2 == .buffered(missing: 1...1))
        let a1 = orderer.receive(makeEvent("a", 1))
        #expect(a1 == .ready([makeEvent("a", 1)]))
        let gaps: [String: ClosedRange<Int64>] = ["b": 1...1]
        #expect(orderer.gaps() == gaps)
        #expect(orderer.lastApplied(account: "b") == nil)
        let b1 = orderer.receive(makeEvent("b", 1))
        #expect(b1 == .ready([makeEvent("b", 1), makeEvent("b", 2)]))
        let sequences: [String: Int64] = ["a": 1, "b": 2]
        #expect(orderer.appliedSequences == sequences)
    }

    @Test("skipGap applies the buffered events over the holes")
    func skipGapAppliesBuffered() {
        var orderer = EventOrderer()
        _ = orderer.receive(makeEvent("a", 1))
        _ = orderer.receive(makeEvent("a", 5))
        _ = orderer.receive(makeEvent("a", 3))
        _ = orderer.receive(makeEvent("b", 2))

        let skipped = orderer.skipGap(account: "a")
        let skippedSequences: [Int64] = [3, 5]
        #expect(skipped.map(\.sequence) == skippedSequences)
        #expect(skipped == [makeEvent("a", 3), makeEvent("a", 5)])
        #expect(orderer.lastApplied(account: "a") == 5)
        let gaps: [String: ClosedRange<Int64>] = ["b": 1...1]
        #expect(orderer.gaps() == gaps)

        // The events of the holes come too late.
        let late2 = orderer.receive(makeEvent("a", 2))
        #expect(late2 == .stale(lastApplied: 5))
        let late4 = orderer.receive(makeEvent("a", 4))
        #expect(late4 == .stale(lastApplied: 5))
        let next = orderer.receive(makeEvent("a", 6))
        #expect(next == .ready([makeEvent("a", 6)]))

        // Nothing buffered: nothing to skip.
        let again = orderer.skipGap(account: "a")
        #expect(again.isEmpty)
        let unknown = orderer.skipGap(account: "nobody")
        #expect(unknown.isEmpty)
        #expect(orderer.lastApplied(account: "nobody") == nil)

        // An account with nothing applied yet.
        let skippedB = orderer.skipGap(account: "b")
        #expect(skippedB == [makeEvent("b", 2)])
        #expect(orderer.lastApplied(account: "b") == 2)
        #expect(orderer.gaps().isEmpty)
    }

    @Test("atFirstSeen starts an unknown account at its first event")
    func startAtFirstSeen() {
        var orderer = EventOrderer(unknownAccountsStart: .atFirstSeen)
        let first = orderer.receive(makeEvent("a", 41))
        #expect(first == .ready([makeEvent("a", 41)]))
        #expect(orderer.lastApplied(account: "a") == 41)
        let early = orderer.receive(makeEvent("a", 43))
        #expect(early == .buffered(missing: 42...42))
        let older = orderer.receive(makeEvent("a", 40))
        #expect(older == .stale(lastApplied: 41))
        let filler = orderer.receive(makeEvent("a", 42))
        #expect(filler == .ready([makeEvent("a", 42), makeEvent("a", 43)]))

        // Known accounts resume where they were.
        var resumed = EventOrderer(lastApplied: ["a": 10], unknownAccountsStart: .atFirstSeen)
        let a12 = resumed.receive(makeEvent("a", 12))
        #expect(a12 == .buffered(missing: 11...11))
        let b7 = resumed.receive(makeEvent("b", 7))
        #expect(b7 == .ready([makeEvent("b", 7)]))

        // With atOne, the same first event waits for 1...40.
        var strict = EventOrderer(unknownAccountsStart: .atOne)
        let waiting = strict.receive(makeEvent("a", 41))
        #expect(waiting == .buffered(missing: 1...40))
    }

    @Test("Events at or before the last applied sequence are stale")
    func staleEvents() {
        var orderer = EventOrderer(lastApplied: ["a": 3])
        #expect(orderer.lastApplied(account: "a") == 3)
        let two = orderer.receive(makeEvent("a", 2))
        #expect(two == .stale(lastApplied: 3))
        let three = orderer.receive(makeEvent("a", 3))
        #expect(three == .stale(lastApplied: 3))
        let four = orderer.receive(makeEvent("a", 4))
        #expect(four == .ready([makeEvent("a", 4)]))
        // The same sequence under another id: stale, not applied twice.
        let otherFour = orderer.receive(makeEvent("a", 4, id: "another-id"))
        #expect(otherFour == .stale(lastApplied: 4))
        // The same id again: a duplicate.
        let repeatedFour = orderer.receive(makeEvent("a", 4))
        #expect(repeatedFour == .duplicate)
        // Sequences start at 1.
        let zero = orderer.receive(makeEvent("b", 0))
        #expect(zero == .stale(lastApplied: 0))
    }

    @Test("Repeats of buffered events are duplicates; forgotten ids of applied events are stale")
    func repeatsAndIDMemory() {
        var orderer = EventOrderer(rememberedIDs: 2)
        let early = orderer.receive(makeEvent("a", 3))
        #expect(early == .buffered(missing: 1...2))
        let repeatedEarly = orderer.receive(makeEvent("a", 3))
        #expect(repeatedEarly == .duplicate)
        let sameSequence = orderer.receive(makeEvent("a", 3, id: "another-id"))
        #expect(sameSequence == .duplicate)

        _ = orderer.receive(makeEvent("a", 1))
        let filler = orderer.receive(makeEvent("a", 2))
        #expect(filler == .ready([makeEvent("a", 2), makeEvent("a", 3)]))

        // Only the last two ids are remembered ("a-1" and "a-2"; "a-3" was forgotten).
        let forgotten = orderer.receive(makeEvent("a", 3))
        #expect(forgotten == .stale(lastApplied: 3))
        let remembered = orderer.receive(makeEvent("a", 2))
        #expect(remembered == .duplicate)
    }

    @Test("Many events with a small id memory stay consistent")
    func longRun() {
        var orderer = EventOrderer(rememberedIDs: 16)
        var applied: [Int64] = []
        // Deliver 1...3000 in blocks of 10 reversed: each block is buffered, then released.
        for block in stride(from: Int64(0), to: 3_000, by: 10) {
            for offset in stride(from: Int64(10), through: 1, by: -1) {
                if case .ready(let events) = orderer.receive(makeEvent("a", block + offset)) {
                    applied += events.map(\.sequence)
                }
            }
        }
        let expected = Array(stride(from: Int64(1), through: 3_000, by: 1))
        #expect(applied == expected)
        #expect(orderer.lastApplied(account: "a") == 3_000)
        let old = orderer.receive(makeEvent("a", 1))
        #expect(old == .stale(lastApplied: 3_000))
    }

    @Test("The buffer is bounded, in all and per account: an early event past a bound is not kept (full), and is taken once there is room")
    func boundedBuffer() {
        var orderer = EventOrderer(maximumBuffered: 5, maximumBufferedPerAccount: 3)
        // One account floods events far ahead of its missing first one.
        for sequence in Int64(2)...4 {
            #expect(orderer.receive(makeEvent("a", sequence)) == .buffered(missing: 1...(sequence - 1)))
        }
        #expect(orderer.receive(makeEvent("a", 5)) == .full(limit: 3))
        #expect(orderer.bufferedCount == 3)
        // Another account still has room, up to the total.
        #expect(orderer.receive(makeEvent("b", 2)) == .buffered(missing: 1...1))
        #expect(orderer.receive(makeEvent("b", 3)) == .buffered(missing: 1...2))
        #expect(orderer.receive(makeEvent("c", 2)) == .full(limit: 5))
        // An event that is next is never refused, and frees what it releases.
        if case .ready(let events) = orderer.receive(makeEvent("a", 1)) {
            #expect(events.map(\.sequence) == [1, 2, 3, 4])
        } else {
            Issue.record("a's first event was not applied")
        }
        #expect(orderer.bufferedCount == 2)
        // The refused event was not remembered: sent again, it is applied in order.
        if case .ready(let events) = orderer.receive(makeEvent("a", 5)) {
            #expect(events.map(\.sequence) == [5])
        } else {
            Issue.record("a's fifth event, sent again, was not applied")
        }
        #expect(orderer.receive(makeEvent("c", 2)) == .buffered(missing: 1...1))
        #expect(orderer.skipGap(account: "b").map(\.sequence) == [2, 3])
        #expect(orderer.bufferedCount == 1)
    }
}

/// An event of `account` numbered `sequence`, with id `<account>-<sequence>` unless given.
private func makeEvent(_ account: String, _ sequence: Int64, id: String? = nil) -> WebhookEvent {
    WebhookEvent(
        id: id ?? "\(account)-\(sequence)",
        accountID: account,
        sequence: sequence,
        type: .tierChanged,
        occurredAt: Date(timeIntervalSince1970: 1_772_366_400 + Double(sequence)),
        previousTier: "free",
        state: WebhookAccountState(
            tier: "tier-\(sequence)", features: ["sync"], limits: ["devices": .limited(Int(sequence))], ads: false,
            entitlements: [], nextTransitionAt: nil)
    )
}
