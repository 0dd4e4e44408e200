import Curl
import Foundation
import Postgres
import PropertyBased
import SyncCore
import SyncStore
import TestSupport
import Testing

/// The usage law end to end (docs/USAGE.md, "Which allowance an account has"):
/// the same facts (subscription and pass reports of several tiers, renewals, lapses and refunds,
/// minute packs with refunds and reversals, rewards, operators' adjustments, usage from several
/// devices, holds settled) give the same balance and the same announced period totals whatever
/// order, duplication and batching they arrive in. Every fact goes through the real storage path:
/// reports through the inbox and the resolution engine's batches (left pending across other
/// writes at random), usage, rewards, adjustments and holds through the ledger, announcements
/// through the sweeper.
@Suite("Usage law")
struct UsageLawTests {
    /// The present of every scenario: a fixed instant, so the periods are the same every run.
    static let now = Date(timeIntervalSince1970: 1_795_000_000)
    static let day: TimeInterval = 86_400
    /// The devices of every account have known the service since then.
    static let known = now.addingTimeInterval(-85 * day)
    static let month: ISODuration = {
        guard let month = ISODuration("P1M") else { preconditionFailure("P1M parses") }
        return month
    }()

    struct Item: Sendable, Hashable {
        var id: String
        var units: Int
        var at: Date
    }

    /// One fact, as it reaches the service.
    enum Fact: Sendable {
        /// A device's sync or the store's notification: reports of one transaction.
        case reports([Report])
        case usage(device: String, items: [Item])
        case adjustment(id: String, units: Int)
        case reward(transaction: String, units: Int, at: Date)
        /// The settle of the hold reserved at the start with this index.
        case settle(hold: Int, units: Int)
    }

    struct Scenario: Sendable {
        var facts: [Fact]
        /// Units of the holds reserved before any fact arrives.
        var holds: [Int]
    }

    static func scenario(_ seed: UInt64) -> Scenario {
        var rng = SeededGenerator(seed: seed)
        var facts: [Fact] = []
        func time(_ earliest: Date, _ latest: Date) -> Date {
            let span = max(0, latest.timeIntervalSince(earliest))
            return earliest.addingTimeInterval((Double.random(in: 0...1, using: &rng) * span).rounded(.down))
        }
        // Subscriptions and passes: up to two chains of purchases, some refunded.
        for chain in 0..<Int.random(in: 0...2, using: &rng) {
            let product = ["voip.basic.monthly", "voip.premium.monthly", "voip.basic.pass.3m", "voip.basic.yearly"]
                .randomElement(using: &rng) ?? "voip.basic.monthly"
            let first = time(now.addingTimeInterval(-80 * day), now.addingTimeInterval(-day))
            for renewal in 0..<Int.random(in: 1...3, using: &rng) {
                let purchased = month.advance(first, times: renewal)
                guard purchased < now else { break }
                let expires: Date? = product.hasSuffix("monthly") ? month.advance(first, times: renewal + 1)
                    : product.hasSuffix("yearly") ? month.advance(purchased, times: 12) : nil
                let transaction = "s\(chain)-\(renewal)"
                func report(_ suffix: String, revoked: Date? = nil) -> Report {
                    Report(
                        reportID: "\(transaction)-\(suffix)", deviceID: "phone", observedAt: now, productID: product,
                        originalTransactionID: "s\(chain)", transactionID: transaction, purchasedAt: purchased,
                        expiresAt: expires, revokedAt: revoked, willAutoRenew: true)
                }
                facts.append(.reports([report("bought")]))
                if Int.random(in: 0..<5, using: &rng) == 0 {
                    facts.append(.reports([report("refunded", revoked: time(purchased, min(now, expires ?? now)))]))
                }
                if product.contains("pass") || product.hasSuffix("yearly") { break }
            }
        }
        // Minute packs, verified: some refunded, some refunds reversed.
        for pack in 0..<Int.random(in: 0...2, using: &rng) {
            let purchased = time(now.addingTimeInterval(-70 * day), now)
            func report(_ suffix: String, revoked: Date? = nil, signed: Date) -> Report {
                Report(
                    reportID: "k\(pack)-\(suffix)", deviceID: "phone", observedAt: now, productID: "voip.credits.100",
                    originalTransactionID: "k\(pack)", transactionID: "k\(pack)", purchasedAt: purchased, revokedAt: revoked,
                    trust: .verified(signedDate: signed))
            }
            facts.append(.reports([report("bought", signed: purchased)]))
            if Bool.random(using: &rng) {
                let refunded = time(purchased, now)
                facts.append(.reports([report("refunded", revoked: refunded, signed: refunded)]))
                if Bool.random(using: &rng) {
                    facts.append(.reports([report("reversed", signed: time(refunded.addingTimeInterval(1), now.addingTimeInterval(1)))]))
                }
            }
        }
        // Usage from two devices, in batches, at any time since they first reached the service.
        for device in ["phone", "tablet"] {
            for call in 0..<Int.random(in: 1...4, using: &rng) {
                let items = (0..<Int.random(in: 1...3, using: &rng)).map { index in
                    Item(id: "c\(call)-\(index)", units: Int.random(in: 1...400, using: &rng), at: time(known, now))
                }
                facts.append(.usage(device: device, items: items))
            }
        }
        for adjustment in 0..<Int.random(in: 0...2, using: &rng) {
            let units = Int.random(in: 1...150, using: &rng) * (Bool.random(using: &rng) ? 1 : -1)
            facts.append(.adjustment(id: "a\(adjustment)", units: units))
        }
        // Rewards within the daily cap (30), so none is refused in any order.
        for reward in 0..<Int.random(in: 0...2, using: &rng) {
            facts.append(.reward(transaction: "r\(reward)", units: Int.random(in: 5...10, using: &rng), at: time(now.addingTimeInterval(-20 * 3600), now)))
        }
        let holds = (0..<Int.random(in: 0...2, using: &rng)).map { _ in Int.random(in: 10...30, using: &rng) }
        for (index, _) in holds.enumerated() {
            facts.append(.settle(hold: index, units: Int.random(in: 0...60, using: &rng)))
        }
        return Scenario(facts: facts, holds: holds)
    }

    /// What an account came to: its balances now and the totals last announced for each closed
    /// period that had usage.
    struct Outcome: Equatable, CustomStringConvertible {
        var balances: [UsageBalance]
        var announced: [String]

        var description: String {
            let periods = balances.flatMap(\.periods).map { "\($0.start)…\($0.end) \($0.allowance) used \($0.used) overage \($0.overage)" }
            return "available \(balances.map { "\($0.available.map(String.init) ?? "∞")" }) credits \(balances.map(\.credits)) rewards \(balances.map(\.rewards))\n"
                + periods.joined(separator: "\n") + "\nannounced:\n" + announced.joined(separator: "\n")
        }
    }

    /// Applies `facts` to `account` in the given order: reports are left pending at random and
    /// resolved in the engine's batches, duplicates are sent again.
    static func apply(
        _ scenario: Scenario, order: [Int], to account: String, env: TestEnvironment, rng: inout SeededGenerator
    ) async throws -> Outcome {
        let clock = ManualClock(start: now)
        let engine = ResolutionEngine(pool: env.pool, catalogue: .default, clock: clock)
        let ledger = UsageLedger(pool: env.pool, catalogue: .default)
        let holds = UsageHolds(pool: env.pool, catalogue: .default)
        let inbox = ReportInbox(pool: env.pool)
        try await env.knownDevices(["phone", "tablet"], of: account, since: known)
        var holdIDs: [UUID] = []
        for units in scenario.holds {
            let reservation = try await holds.reserve(
                accountID: account, device: DeviceInfo(id: "phone"), meter: "minutes", units: units, ttl: 3_600, now: now)
            holdIDs.append(try #require(reservation.hold?.id, "the hold of \(units) is granted before anything else happens"))
        }
        func resolvePending() async throws {
            while try await engine.resolvePendingBatch(limit: 50).reportsResolved > 0 {}
        }
        for index in order {
            switch scenario.facts[index] {
            case .reports(let reports):
                _ = try await inbox.submit(accountID: account, device: DeviceInfo(id: "phone"), reports: reports, seenAt: now)
                if Bool.random(using: &rng) { try await resolvePending() }
            case .usage(let device, let items):
                let entries = items.map {
                    UsageEntry(id: "usage:\(device):\($0.id)", meter: "minutes", kind: .usage, units: $0.units, at: $0.at)
                }
                _ = try await ledger.submit(entries, accountID: account, device: DeviceInfo(id: device), now: now)
            case .adjustment(let id, let units):
                _ = try await ledger.adjust(accountID: account, meter: "minutes", units: units, id: id, actor: "law", reason: "test", now: now)
            case .reward(let transaction, let units, let at):
                let outcome = try await ledger.reward(
                    accountID: account, network: "admob", transactionID: transaction, meter: "minutes", units: units, cap: 30, at: at, now: now)
                #expect(outcome != .overDailyCap(cap: 30, alreadyToday: 0))
            case .settle(let hold, let units):
                _ = try await holds.settle(accountID: account, holdID: holdIDs[hold], units: units, at: now, now: now)
            }
        }
        try await resolvePending()
        // The sweeper announces what the writers marked due.
        for _ in 0..<5 where try await engine.resolveDueAccounts(limit: 100).accountsResolved > 0 {}
        let balances = try await ledger.balances(of: account, now: now)
        // The stored period totals give what every entry, summed again, gives.
        let recomputed = try await ledger.recomputedBalances(of: account, now: now)
        #expect(balances == recomputed, "stored totals \(balances) against recomputed \(recomputed)")
        let announced = try await env.pool.preparedQuery(
            """
            SELECT meter, period_start, period_end, closed_totals::text FROM usage_periods
            WHERE account_id = \(account) AND closed_revision > 0 AND closed_totals IS NOT NULL
              AND ((closed_totals->>'used')::bigint > 0 OR (closed_totals->>'overage')::bigint > 0)
            ORDER BY meter, period_start, period_end
            """
        ).map { row in
            "\(try row.decode(String.self, at: 0)) \(try row.decode(Date.self, at: 1))…\(try row.decode(Date.self, at: 2)) \(try row.decode(String.self, at: 3))"
        }
        return Outcome(balances: balances, announced: announced)
    }

    @Test("the same facts give the same balance and announced totals in any order, duplication and batching")
    func sameFactsSameBill() async throws {
        try await TestEnvironment.withFresh { env in
            await propertyCheck(count: 25, input: Gen.uint64()) { seed in
                do {
                    let scenario = Self.scenario(seed)
                    var rng = SeededGenerator(seed: seed ^ 0x5EED)
                    var outcomes: [Outcome] = []
                    // Accounts of their own: shrinking runs a seed again in the same database.
                    let run = UUID().uuidString.prefix(8).lowercased()
                    for attempt in 0..<3 {
                        var order = Array(scenario.facts.indices).shuffled(using: &rng)
                        // Some facts arrive twice (a retry, a second device relaying a purchase).
                        for _ in 0..<Int.random(in: 0...3, using: &rng) {
                            if let again = scenario.facts.indices.randomElement(using: &rng) {
                                order.insert(again, at: Int.random(in: 0...order.count, using: &rng))
                            }
                        }
                        outcomes.append(try await Self.apply(scenario, order: order, to: "law-\(run)-\(attempt)", env: env, rng: &rng))
                    }
                    #expect(outcomes[1] == outcomes[0], "seed \(seed):\n\(outcomes[0])\n--- against ---\n\(outcomes[1])")
                    #expect(outcomes[2] == outcomes[0], "seed \(seed):\n\(outcomes[0])\n--- against ---\n\(outcomes[2])")
                    // The last announcement of every closed period is its true total.
                    let closed = outcomes[0].balances.flatMap(\.periods).filter { $0.end <= Self.now && ($0.used > 0 || $0.overage > 0) }
                    #expect(outcomes[0].announced.count == closed.count, "seed \(seed): \(outcomes[0])")
                } catch {
                    Issue.record("seed \(seed): \(error)")
                }
            }
        }
    }

    @Test("the issue's reproduction: usage before the subscription is reported, or after, is the same bill")
    func usageBeforeOrAfterTheSubscription() async throws {
        try await TestEnvironment.withFresh { env in
            let purchased = Self.now.addingTimeInterval(-10 * Self.day)
            let subscription = Report(
                reportID: "sub", deviceID: "phone", observedAt: Self.now, productID: "voip.basic.monthly", originalTransactionID: "s",
                transactionID: "s", purchasedAt: purchased, expiresAt: Self.month.advance(purchased), willAutoRenew: true)
            let scenario = Scenario(
                facts: [
                    .usage(device: "phone", items: [Item(id: "c1", units: 1_100, at: Self.now.addingTimeInterval(-3_600))]),
                    .reports([subscription]), .adjustment(id: "a1", units: 100), .adjustment(id: "a2", units: -100),
                ],
                holds: [])
            var rng = SeededGenerator(seed: 50)
            let a = try await Self.apply(scenario, order: [0, 1, 2, 3], to: "a", env: env, rng: &rng)
            let b = try await Self.apply(scenario, order: [1, 0, 2, 3], to: "b", env: env, rng: &rng)
            #expect(a == b, "\(a)\n--- against ---\n\(b)")
            let current = try #require(a.balances.first?.current)
            #expect(current.allowance == .limited(1_000))
            #expect(current.start == purchased)
            #expect(current.used == 1_100)
            // The adjustment's credit is spent before the debit takes it back: no overage, credits -100.
            #expect(current.overage == 0)
            #expect(a.balances.first?.credits == -100)
        }
    }
}

/// The usage law across two `serve` processes sharing one database (docs/USAGE.md): facts of
/// random scenarios (subscriptions, renewals, refunds, usage from two devices, holds settled,
/// operators' adjustments) sent in random orders, each to either process at random, as devices
/// and the `subsync` command line would; both processes resolve (a worker each) and sweep. Every
/// order of one scenario ends with the same balance and the same announced period totals.
@Suite("Usage law across processes", .serialized)
struct UsageLawAcrossProcessesTests {
    @Test("random orders of the same facts through two serve processes give the same balance and announced totals")
    func twoProcesses() async throws {
        let first = try await ServeProcess.onTestDatabase(workers: 1, environment: ServeProcess.apiOnly)
        defer { first.terminate() }
        let second = try await ServeProcess.onTestDatabase(workers: 1, environment: ServeProcess.apiOnly)
        defer { second.terminate() }
        let client = CurlClient(configuration: .init(addressGuard: WebhookOrderTests.loopback ?? .publicOnly))
        defer { client.shutdown() }
        let pool = ConnectionPool(configuration: .init(connection: try TestDatabase.configuration(), maximumConnections: 2, leaseTimeout: .seconds(600)))
        let now = Date()
        let run = UUID().uuidString.prefix(8).lowercased()

        func send(_ method: String, _ path: String, _ body: Any?) async throws -> [String: Any] {
            let port = Bool.random() ? first.port : second.port
            let data = try body.map { try JSONSerialization.data(withJSONObject: $0) }
            for _ in 0..<600 {
                let response = try await client.execute(CurlRequest(
                    url: "http://127.0.0.1:\(port)\(path)", method: method,
                    headers: [("Authorization", "Bearer \(ServeProcess.adminKey)"), ("Content-Type", "application/json")],
                    body: data.map(Array.init) ?? [], totalTimeout: .seconds(300)))
                // A database busy on a starved core answers 503: retried, as a device would.
                if response.status == 503 {
                    try await Task.sleep(for: .milliseconds(500))
                    continue
                }
                let json = (try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]) ?? [:]
                #expect((200..<300).contains(response.status), "\(method) \(path): \(response.status) \(json)")
                return json
            }
            throw POSIXError(.ETIMEDOUT)
        }

        for seed in [UInt64(7), 11, 29] {
            // The scenario of the in-process law, moved to now, without what needs a signature
            // (packs, rewards).
            let base = UsageLawTests.scenario(seed)
            let shift = now.timeIntervalSince(UsageLawTests.now)
            let facts = base.facts.compactMap { fact -> UsageLawTests.Fact? in
                switch fact {
                case .reports(let reports):
                    guard reports.allSatisfy({ $0.productID != "voip.credits.100" }) else { return nil }
                    return .reports(reports.map { report in
                        var moved = report
                        moved.purchasedAt += shift
                        moved.observedAt += shift
                        moved.expiresAt = report.expiresAt.map { $0 + shift }
                        moved.revokedAt = report.revokedAt.map { $0 + shift }
                        return moved
                    })
                case .usage(let device, let items):
                    return .usage(device: device, items: items.map { UsageLawTests.Item(id: $0.id, units: $0.units, at: $0.at + shift) })
                case .adjustment, .settle: return fact
                case .reward: return nil
                }
            }
            var outcomes: [String] = []
            for order in 0..<2 {
                let account = "law2-\(run)-\(seed)-\(order)"
                try await pool.preparedQuery(
                    """
                    INSERT INTO devices (account_id, device_id, first_seen_at, last_seen_at)
                    SELECT \(account), d, \(UsageLawTests.known + shift), \(UsageLawTests.known + shift) FROM unnest(ARRAY['phone', 'tablet']) AS d
                    """
                )
                var holds: [String] = []
                for units in base.holds {
                    let reserved = try await send("POST", "/v1/accounts/\(account)/usage/holds",
                                                  ["device": ["id": "phone"], "meter": "minutes", "units": units, "ttl_seconds": 3_600])
                    holds.append(try #require((reserved["hold"] as? [String: Any])?["id"] as? String))
                }
                var rng = SeededGenerator(seed: seed &+ UInt64(order) &* 7_919)
                for index in facts.indices.shuffled(using: &rng) {
                    switch facts[index] {
                    case .reports(let reports):
                        let body = try JSONSerialization.jsonObject(with: try SyncBody(device: "phone", reports: reports).data)
                        _ = try await send("POST", "/v1/accounts/\(account)/sync", body)
                    case .usage(let device, let items):
                        _ = try await send("POST", "/v1/accounts/\(account)/usage", [
                            "device": ["id": device],
                            "usage": items.map { ["id": $0.id, "meter": "minutes", "units": $0.units, "at": RFC3339.format($0.at)] },
                        ])
                    case .adjustment(let id, let units):
                        // As an operator would: the command line, a third process.
                        let status = try await runSubsync(["credits", "adjust", "--account", account, "--units", String(units), "--id", id, "--reason", "law"])
                        #expect(status == 0)
                    case .settle(let hold, let units):
                        _ = try await send("POST", "/v1/accounts/\(account)/usage/holds/\(holds[hold])/settle", ["units": units])
                    case .reward:
                        break
                    }
                }
                outcomes.append(account)
            }
            // Every report resolved and every revision the writers marked announced by a sweep.
            let settled = try await waitUntil(seconds: 600) {
                try await pool.preparedQuery(
                    """
                    SELECT (SELECT count(*) FROM reports WHERE account_id = ANY(\(outcomes)::text[]) AND status = 'pending')
                         + (SELECT count(*) FROM usage_periods WHERE account_id = ANY(\(outcomes)::text[]) AND revision_due)
                    """
                )[0].decode(Int.self, at: 0) == 0
            }
            #expect(settled)
            var answers: [String] = []
            for account in outcomes {
                let usage = try await send("GET", "/v1/accounts/\(account)/usage?period=all&meter=minutes", nil)
                let meter = try #require((usage["meters"] as? [[String: Any]])?.first)
                let balance = try JSONSerialization.data(withJSONObject: [meter["balance"] ?? NSNull(), meter["periods"] ?? NSNull()], options: [.sortedKeys])
                let announced = try await pool.preparedQuery(
                    """
                    SELECT period_start, period_end, closed_totals::text FROM usage_periods
                    WHERE account_id = \(account) AND closed_revision > 0 AND closed_totals IS NOT NULL
                      AND ((closed_totals->>'used')::bigint > 0 OR (closed_totals->>'overage')::bigint > 0)
                    ORDER BY period_start
                    """
                ).map { "\(try $0.decode(Date.self, at: 0)) \(try $0.decode(Date.self, at: 1)) \(try $0.decode(String.self, at: 2))" }
                answers.append(String(decoding: balance, as: UTF8.self) + "\n" + announced.joined(separator: "\n"))
            }
            #expect(answers[0] == answers[1], "seed \(seed):\n\(answers[0])\n--- against ---\n\(answers[1])")
        }
        await pool.close()
    }

    /// Runs the `subsync` binary with the suite's database; its exit status.
    func runSubsync(_ arguments: [String]) async throws -> Int32 {
        var environment = try TestDatabase.environment()
        environment["SUBSYNC_LOG_LEVEL"] = "error"
        return try await SubsyncCommand.run(arguments, environment: environment).status
    }
}
