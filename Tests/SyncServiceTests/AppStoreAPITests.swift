import Foundation
import SyncCore
import SyncStore
@testable import SyncService
import TestSupport
import Testing

/// The App Store Server API client (docs/STORE.md) against a real HTTP double on
/// loopback (Tests/Doubles/appstore-double.py) that verifies every request's JWT with PyJWT against the
/// public half of Apple's published test key and answers in Apple's shapes.
@Suite("App Store Server API client", .serialized)
struct AppStoreAPITests {
    let authority: TestCertificateAuthority
    let verifier: StoreKitVerifier

    init() throws {
        authority = try TestCertificateAuthority()
        verifier = try StoreKitVerifier(rootCertificates: [authority.root], bundleID: StoreKitTrust.bundleID, allowedEnvironments: [.production])
    }

    func signedTransaction(_ original: String, id: String? = nil, purchased: Date, expires: Date, ca: TestCertificateAuthority? = nil) throws -> String {
        try (ca ?? authority).sign(StoreKitTrust.transaction(original: original, id: id, purchased: purchased, expires: expires, signed: Date()))
    }

    /// The error `body` threw, `nil` when it returned.
    static func failure(_ body: () async throws(AppStoreAPIError) -> Void) async -> AppStoreAPIError? {
        do {
            try await body()
            return nil
        } catch {
            return error
        }
    }


    @Test("statuses: every request carries a token the double verifies (ES256, kid, typ, iss, aud, bid, at most 60 minutes), reused while valid; signed fields verify like device reports, forged ones do not")
    func statusesAndToken() async throws {
        let double = try await AppStoreDouble(bundleID: StoreKitTrust.bundleID)
        let now = Date()
        let genuine = try signedTransaction("t-1", purchased: now.addingTimeInterval(-86_400), expires: now.addingTimeInterval(29 * 86_400))
        let forged = try signedTransaction("t-1", purchased: now, expires: now.addingTimeInterval(365 * 86_400), ca: try TestCertificateAuthority())
        try await double.script("GET", "/inApps/v1/subscriptions/t-1", [AppStoreDouble.Answer(json: [
            "environment": "Production", "bundleId": .string(StoreKitTrust.bundleID), "appAppleId": 5454545,
            "data": [["subscriptionGroupIdentifier": "group", "lastTransactions": [
                ["status": 1, "originalTransactionId": "t-1", "signedTransactionInfo": .string(genuine), "signedRenewalInfo": "renewal"],
                ["status": 1, "originalTransactionId": "t-1", "signedTransactionInfo": .string(forged)],
            ]]],
        ])])
        let api = try AppStoreDouble.client(double)
        let answer = try #require(try await api.subscriptionStatuses(transactionID: "t-1"))
        let last = try #require(answer.data.first?.lastTransactions)
        #expect(last.count == 2)
        #expect(last.first?.status == 1)
        #expect(last.first?.signedRenewalInfo == "renewal")
        let verified = try await verifier.verifyTransaction(try #require(last.first?.signedTransactionInfo))
        #expect(verified.payload.originalTransactionId == "t-1")
        await #expect(throws: StoreKitVerificationError.self) { try await verifier.verifyTransaction(try #require(last.last?.signedTransactionInfo)) }
        _ = try await api.subscriptionStatuses(transactionID: "t-1")

        let requests = try await double.requests()
        #expect(requests.count == 2)
        for request in requests {
            #expect(request.jwt.valid, "\(request.jwt.error ?? "")")
            let claims = try #require(request.jwt.claims)
            #expect(claims.aud == "appstoreconnect-v1")
            #expect(claims.bid == StoreKitTrust.bundleID)
            #expect(claims.iss == AppStoreDouble.issuerID)
            #expect(claims.exp - claims.iat == 300)
            #expect(request.jwt.header?["kid"] == AppStoreDouble.keyID)
            #expect(request.jwt.header?["alg"] == "ES256")
        }
        // One token for both requests (it is valid for five minutes).
        #expect(requests.first?.jwt.claims?.iat == requests.last?.jwt.claims?.iat)

        // A key id the double does not know: 401, recorded with why, and the client says so.
        let wrong = try AppStoreDouble.client(double, keyID: "OTHERKEY")
        await #expect(throws: AppStoreAPIError.api(status: 401, code: nil, message: nil)) { try await wrong.subscriptionStatuses(transactionID: "t-1") }
        #expect(try await double.requests().last?.jwt.error?.contains("kid") == true)
    }

    @Test("transaction and refund history page by revision while hasMore; notification history by paginationToken with its dates in milliseconds; a transaction the store does not know is an answer")
    func paging() async throws {
        let double = try await AppStoreDouble(bundleID: StoreKitTrust.bundleID)
        let now = Date()
        let signed = try (0..<3).map { try signedTransaction("t-2", id: "t-2-\($0)", purchased: now.addingTimeInterval(Double($0) * 86_400), expires: now.addingTimeInterval(Double($0 + 30) * 86_400)) }
        try await double.script("GET", "/inApps/v2/history/t-2", query: ["sort": "ASCENDING"], [AppStoreDouble.Answer(json: [
            "revision": "r1", "hasMore": true, "bundleId": .string(StoreKitTrust.bundleID), "environment": "Production",
            "signedTransactions": [.string(signed[0]), .string(signed[1])],
        ])])
        try await double.script("GET", "/inApps/v2/history/t-2", query: ["sort": "ASCENDING", "revision": "r1"], [AppStoreDouble.Answer(json: [
            "revision": "r2", "hasMore": false, "signedTransactions": [.string(signed[2])],
        ])])
        try await double.script("GET", "/inApps/v2/refund/lookup/t-2", query: [:], [AppStoreDouble.Answer(json: [
            "revision": "x1", "hasMore": true, "signedTransactions": [.string(signed[1])],
        ])])
        try await double.script("GET", "/inApps/v2/refund/lookup/t-2", query: ["revision": "x1"], [AppStoreDouble.Answer(json: [
            "revision": "x2", "hasMore": false, "signedTransactions": [],
        ])])
        let api = try AppStoreDouble.client(double)
        #expect(try await api.allTransactions(transactionID: "t-2") == signed)
        #expect(try await api.allRefunds(transactionID: "t-2") == [signed[1]])
        #expect(try await api.allTransactions(transactionID: "unknown") == nil)
        #expect(try await api.subscriptionStatuses(transactionID: "unknown") == nil)
        await #expect(throws: AppStoreAPIError.self) { try await api.subscriptionStatuses(transactionID: "../admin") }
        // Answers that would page for ever, or end short, are malformed, not a list.
        for (query, next) in [([:], "r1"), (["revision": "r1"], "r2"), (["revision": "r2"], "r1")] as [([String: String], String)] {
            try await double.script("GET", "/inApps/v2/history/t-loop", query: query.merging(["sort": "ASCENDING"]) { $1 }, [AppStoreDouble.Answer(json: [
                "revision": .string(next), "hasMore": true, "signedTransactions": [.string(signed[0])],
            ])])
        }
        await #expect(throws: AppStoreAPIError.malformedAnswer("hasMore without a new revision")) { try await api.allTransactions(transactionID: "t-loop") }
        try await double.script("GET", "/inApps/v2/history/t-short", query: ["sort": "ASCENDING"], [AppStoreDouble.Answer(json: [
            "revision": "s1", "hasMore": true, "signedTransactions": [.string(signed[0])],
        ])])
        await #expect(throws: AppStoreAPIError.malformedAnswer("transaction not found after the first page")) {
            try await api.allTransactions(transactionID: "t-short")
        }

        try await double.script("POST", "/inApps/v1/notifications/history", query: [:], [AppStoreDouble.Answer(json: [
            "paginationToken": "p2", "hasMore": true,
            "notificationHistory": [["signedPayload": "n1", "sendAttempts": [["attemptDate": 1698148900000, "sendAttemptResult": "NO_RESPONSE"]]]],
        ])])
        try await double.script("POST", "/inApps/v1/notifications/history", query: ["paginationToken": "p2"], [AppStoreDouble.Answer(json: [
            "hasMore": false, "notificationHistory": [["signedPayload": "n2"]],
        ])])
        let start = Date(timeIntervalSince1970: 1_790_000_000.25)
        let end = Date(timeIntervalSince1970: 1_790_003_600)
        let first = try await api.notificationHistory(from: start, to: end)
        #expect(first.notificationHistory.map(\.signedPayload) == ["n1"])
        #expect(first.notificationHistory.first?.sendAttempts?.first?.sendAttemptResult == "NO_RESPONSE")
        #expect(first.hasMore)
        let token = first.paginationToken ?? "none"
        #expect(token == "p2")
        let second = try await api.notificationHistory(from: start, to: end, paginationToken: token)
        #expect(second.notificationHistory.map(\.signedPayload) == ["n2"])
        #expect(!second.hasMore)
        let posted = try await double.requests().filter { $0.path == "/inApps/v1/notifications/history" }
        #expect(posted.count == 2)
        for request in posted {
            let body = try #require(try JSONSerialization.jsonObject(with: Data(request.body.utf8)) as? [String: Any])
            #expect(body["startDate"] as? Int == 1_790_000_000_250)
            #expect(body["endDate"] as? Int == 1_790_003_600_000)
        }
    }

    @Test("429 waits for its Retry-After (a UNIX time in ms); 5xx and Apple's retryable codes back off; other errors come back at once with Apple's code; a wait too long is the caller's")
    func errorsAndRetries() async throws {
        let double = try await AppStoreDouble(bundleID: StoreKitTrust.bundleID)
        let ok = AppStoreDouble.Answer(json: ["data": []])
        let retryAt = Date().addingTimeInterval(1.5)
        try await double.script("GET", "/inApps/v1/subscriptions/t-429", [
            AppStoreDouble.Answer(status: 429, json: AppStoreDouble.error(4290000, "Rate limit exceeded."), headers: ["Retry-After": String(Int64(retryAt.timeIntervalSince1970 * 1000))]),
            ok,
        ])
        try await double.script("GET", "/inApps/v1/subscriptions/t-500", [AppStoreDouble.Answer(status: 500, json: AppStoreDouble.error(5000000, "An unknown error occurred.")), ok])
        try await double.script("GET", "/inApps/v1/subscriptions/t-retry", [AppStoreDouble.Answer(status: 404, json: AppStoreDouble.error(4040002, "Account not found. Please try again.")), ok])
        try await double.script("GET", "/inApps/v1/subscriptions/t-bad", [AppStoreDouble.Answer(status: 400, json: AppStoreDouble.error(4000006, "Invalid transaction id."))])
        try await double.script("GET", "/inApps/v1/subscriptions/t-later", [
            AppStoreDouble.Answer(status: 429, json: AppStoreDouble.error(4290000, "Rate limit exceeded."), headers: ["Retry-After": String(Int64(Date().addingTimeInterval(3_600).timeIntervalSince1970 * 1000))]),
        ])
        try await double.script("GET", "/inApps/v1/subscriptions/t-huge", [
            AppStoreDouble.Answer(status: 429, json: AppStoreDouble.error(4290000, "Rate limit exceeded.\u{1b}[31m\nforged log line"), headers: ["Retry-After": "1e22"]),
        ])
        try await double.script("GET", "/inApps/v1/subscriptions/t-down", [AppStoreDouble.Answer(status: 503, raw: "<html>down</html>")])
        try await double.script("GET", "/inApps/v1/subscriptions/t-slow", [AppStoreDouble.Answer(json: ["data": []], delay: 5)])
        let api = try AppStoreDouble.client(double, attempts: 3)

        #expect(try await api.subscriptionStatuses(transactionID: "t-429") != nil)
        var seen = try await double.requests().filter { $0.path.hasSuffix("/t-429") }
        #expect(seen.count == 2)
        #expect((seen.last?.time ?? 0) >= retryAt.timeIntervalSince1970 - 0.01, "the retry went before Retry-After")
        #expect(try await api.subscriptionStatuses(transactionID: "t-500") != nil)
        #expect(try await api.subscriptionStatuses(transactionID: "t-retry") != nil)
        seen = try await double.requests()
        #expect(seen.filter { $0.path.hasSuffix("/t-500") }.count == 2)
        #expect(seen.filter { $0.path.hasSuffix("/t-retry") }.count == 2)

        await #expect(throws: AppStoreAPIError.api(status: 400, code: 4000006, message: "Invalid transaction id.")) {
            try await api.subscriptionStatuses(transactionID: "t-bad")
        }
        let later = await Self.failure { () async throws(AppStoreAPIError) in _ = try await api.subscriptionStatuses(transactionID: "t-later") }
        if case .rateLimited(let until)? = later {
            #expect(until > Date().addingTimeInterval(3_000))
        } else {
            Issue.record("a Retry-After an hour away: \(String(describing: later))")
        }
        // A Retry-After no date can hold is a day at most.
        let huge = await Self.failure { () async throws(AppStoreAPIError) in _ = try await api.subscriptionStatuses(transactionID: "t-huge") }
        if case .rateLimited(let until)? = huge {
            #expect(until <= Date().addingTimeInterval(86_400 + 60))
            #expect("\(huge.map(String.init(describing:)) ?? "")".contains("retry after"))
        } else {
            Issue.record("Retry-After 1e22: \(String(describing: huge))")
        }
        #expect(AppStoreServerAPI.printable("bad\u{1b}[31m\nline") == "bad?[31m?line")
        #expect(AppStoreServerAPI.printable(String(repeating: "e\u{301}", count: 1_000)).unicodeScalars.count == 200)
        // The endpoint stays paused for the other callers of this process: told to come back later.
        let paused = await Self.failure { () async throws(AppStoreAPIError) in _ = try await api.subscriptionStatuses(transactionID: "t-500") }
        if case .rateLimited? = paused {} else { Issue.record("after a day-long 429: \(String(describing: paused))") }
        let fresh = try AppStoreDouble.client(double, attempts: 3)
        await #expect(throws: AppStoreAPIError.api(status: 503, code: nil, message: nil)) { try await fresh.subscriptionStatuses(transactionID: "t-down") }
        seen = try await double.requests()
        #expect(seen.filter { $0.path.hasSuffix("/t-bad") }.count == 1)
        #expect(seen.filter { $0.path.hasSuffix("/t-later") }.count == 1)
        #expect(seen.filter { $0.path.hasSuffix("/t-down") }.count == 3)

        // A slow answer past the request timeout is no answer.
        let impatient = try AppStoreDouble.client(double, attempts: 1, maximumRetryWait: .seconds(1), timeout: .seconds(1))
        let slow = await Self.failure { () async throws(AppStoreAPIError) in _ = try await impatient.subscriptionStatuses(transactionID: "t-slow") }
        if case .timedOut? = slow {} else { Issue.record("a 5 s answer within a 1 s timeout: \(String(describing: slow))") }
        #expect(seen.count + 1 == (try await double.requests()).count, "a timeout is not retried at once")
        // ... and pauses the endpoint, as a 429 does: the next call is told to come back later.
        let next = await Self.failure { () async throws(AppStoreAPIError) in _ = try await impatient.subscriptionStatuses(transactionID: "t-after") }
        if case .rateLimited? = next {} else { Issue.record("a call right after a timeout: \(String(describing: next))") }
    }

    @Test("the rate limiter keeps a process's calls to an endpoint spaced at its rate, however many ask at once")
    func rateLimit() async throws {
        let double = try await AppStoreDouble(bundleID: StoreKitTrust.bundleID)
        let api = try AppStoreDouble.client(double, rate: 5)
        let started = Date().timeIntervalSince1970
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<16 {
                group.addTask { _ = try await api.subscriptionStatuses(transactionID: "t-rate-\(index)") }
            }
            try await group.waitForAll()
        }
        let times = try await double.requests().map(\.time).sorted()
        #expect(times.count == 16)
        // Slots 200 ms apart from the first reservation, which comes after `started`: the 16th
        // cannot reach the double before 3 s have passed. (Measured from the start, not from the
        // first request, which a busy machine may delay while the last is on time; how they
        // bunch on arrival depends on the load too, so the slots themselves are checked below,
        // on a test clock.)
        let last = (times.last ?? 0) - started
        #expect(last >= 2.95, "the 16th request at 5/s came \(last) s after the first was asked for")
    }

    @Test("Apple's limit is per app: two serves and a reconcile, each with its own client, share one schedule through the database and together keep to the rate at the double")
    func rateLimitSharedAcrossProcesses() async throws {
        try await TestEnvironment.withFresh { env in
            let double = try await AppStoreDouble(bundleID: StoreKitTrust.bundleID)
            // Three clients as three processes have them: nothing in common but the database.
            let clients = try (0..<3).map { _ in try AppStoreDouble.client(double, rate: 5, shared: RateBuckets(pool: env.pool)) }
            let started = Date().timeIntervalSince1970
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (process, api) in clients.enumerated() {
                    for index in 0..<6 {
                        group.addTask { _ = try await api.subscriptionStatuses(transactionID: "t-\(process)-\(index)") }
                    }
                }
                try await group.waitForAll()
            }
            let times = try await double.requests().map(\.time).sorted()
            #expect(times.count == 18)
            // One schedule, slots 200 ms apart: the 18th cannot reach the double before 3.4 s
            // (each process alone would have sent its six within one second).
            let last = (times.last ?? 0) - started
            #expect(last >= 3.35, "the 18th request at 5/s for the app came \(last) s after the first was asked for")
        }
    }

    @Test("processes whose clocks disagree by minutes keep one schedule: the database's clock is the schedule's")
    func sharedScheduleAcrossSkewedClocks() async throws {
        // With each caller's own clock, a process more than a minute fast would get a full slot
        // at every ask and the limit would stop holding.
        struct SkewedClock: ServiceClock {
            let offset: TimeInterval
            func now() -> Date { Date().addingTimeInterval(offset) }
            func uptime() -> Duration { SystemClock().uptime() }
            func sleep(for duration: Duration) async throws { try await SystemClock().sleep(for: duration) }
        }
        try await TestEnvironment.withFresh { env in
            let limiters = [-180.0, 0, 180].map { offset in
                AppStoreRateLimiter(rate: { _ in 5 }, clock: SkewedClock(offset: offset), shared: (RateBuckets(pool: env.pool), "appstore:test:"))
            }
            let start = ContinuousClock.now
            let times = try await withThrowingTaskGroup(of: Duration.self) { group in
                for index in 0..<12 {
                    group.addTask {
                        let acquired = try await limiters[index % 3].acquire("subscriptions", maximumWait: .seconds(60))
                        #expect(acquired)
                        return ContinuousClock.now - start
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }.sorted()
            }
            // 12 slots 200 ms apart: the last no sooner than 2.2 s after the first was asked for.
            // (With the callers' clocks, the fast process's six went at once.)
            #expect(times.count == 12)
            #expect((times.last ?? .zero) >= .milliseconds(2_150), "\(times)")
            // The pause of a 429 is not forgotten by a sweep on a clock that runs ahead.
            await limiters[0].pause("history", for: .seconds(60))
            let buckets = RateBuckets(pool: env.pool)
            let sweepNow = min(Date().addingTimeInterval(180), try await buckets.databaseNow())
            // (The subscriptions row may be full again by now and go; the pause may not.)
            _ = try await buckets.forgetFull(now: sweepNow)
            let delay = await limiters[2].delay("history")
            #expect(delay > .seconds(50), "\(delay)")
        }
    }

    @Test("the shared schedule: slots 1/rate apart across processes in the order asked, none past the longest wait, a pause for everyone")
    func sharedSlots() async throws {
        try await TestEnvironment.withFresh { env in
            let now = Date(timeIntervalSince1970: 1_800_000_000)
            let one = RateBuckets(pool: env.pool), two = RateBuckets(pool: env.pool)
            var waits: [Duration?] = []
            for index in 0..<6 {
                waits.append(try await (index % 2 == 0 ? one : two).reserveSlot("k", ratePerSecond: 5, now: now, maximumWait: .seconds(30)))
            }
            #expect(waits == (0..<6).map { Duration.milliseconds(200 * $0) })
            #expect(try await two.slotDelay("k", now: now) == .milliseconds(1_200))
            // Past its bound a caller takes nothing; a second later the schedule has moved on.
            #expect(try await one.reserveSlot("k", ratePerSecond: 5, now: now, maximumWait: .seconds(1)) == nil)
            #expect(try await one.reserveSlot("k", ratePerSecond: 5, now: now.addingTimeInterval(1), maximumWait: .seconds(1)) == .milliseconds(200))
            // A 429 seen by one process pauses the other.
            try await one.pauseSlots("k", ratePerSecond: 5, until: now.addingTimeInterval(61), now: now.addingTimeInterval(1))
            #expect(try await two.reserveSlot("k", ratePerSecond: 5, now: now.addingTimeInterval(1), maximumWait: .seconds(30)) == nil)
            #expect(try await two.reserveSlot("k", ratePerSecond: 5, now: now.addingTimeInterval(61), maximumWait: .seconds(30)) == .zero)
            // Other keys (endpoints, apps) have schedules of their own.
            #expect(try await two.reserveSlot("other", ratePerSecond: 5, now: now, maximumWait: .zero) == .zero)
        }
    }

    @Test("the limiter's slots: 1/rate apart in the order asked, none past the longest wait, none before a 429's pause")
    func rateLimiterSlots() async throws {
        let clock = ManualClock(start: Date())
        let limiter = AppStoreRateLimiter(requestsPerSecond: 5, clock: clock)
        var waits: [Duration] = []
        for _ in 0..<8 { waits.append(try #require(await limiter.reserve("subscriptions", maximumWait: .seconds(30)))) }
        #expect(waits == (0..<8).map { Duration.milliseconds(200 * $0) })
        // Another endpoint has slots of its own.
        #expect(await limiter.reserve("history", maximumWait: .seconds(30)) == .zero)
        // A caller that would wait past its bound takes no slot.
        #expect(await limiter.reserve("subscriptions", maximumWait: .seconds(1)) == nil)
        #expect(await limiter.reserve("subscriptions", maximumWait: .seconds(30)) == .milliseconds(1_600))
        // A 429 pauses the endpoint for everyone.
        await limiter.pause("history", for: .seconds(60))
        #expect(await limiter.reserve("history", maximumWait: .seconds(30)) == nil)
        #expect(await limiter.delay("history") == .seconds(60))
        clock.advance(by: .seconds(61))
        #expect(await limiter.reserve("history", maximumWait: .seconds(30)) == .zero)
        // Rates that are not numbers are one a second, not a trap.
        #expect(await AppStoreRateLimiter(requestsPerSecond: .nan, clock: clock).reserve("x", maximumWait: .zero) == .zero)
    }

    @Test("settings: a key file needs its ids and the bundle; base URLs are https or loopback http; the key never shows")
    func settings() throws {
        var environment = [
            "SUBSYNC_APPSTORE_KEY_FILE": AppStoreDouble.keyFile.path, "SUBSYNC_APPSTORE_KEY_ID": "K1", "SUBSYNC_APPSTORE_ISSUER_ID": "I1",
        ]
        let settings = try #require(try AppStoreAPISettings(environment: environment))
        #expect(settings.environment == .production)
        let configuration = try settings.configuration(bundleID: "com.example")
        #expect(configuration.baseURL == "https://api.storekit.apple.com")
        // Apple's published limits, per endpoint and app; the sandbox's are a tenth.
        #expect(configuration.requestsPerSecond(for: "subscriptions") == 50)
        #expect(configuration.requestsPerSecond(for: "refunds") == 10)
        #expect(configuration.requestsPerSecond(for: "test-notification") == 1)
        #expect(!"\(configuration)".contains("PRIVATE"))
        #expect(!"\(configuration)".contains(configuration.privateKey.rawRepresentation.base64EncodedString()))
        #expect(throws: ConfigurationError.self) { try settings.configuration(bundleID: nil) }

        environment["SUBSYNC_APPSTORE_ENVIRONMENT"] = "sandbox"
        let sandbox = try #require(try AppStoreAPISettings(environment: environment)?.configuration(bundleID: "b"))
        #expect(sandbox.requestsPerSecond(for: "subscriptions") == 5)
        #expect(sandbox.requestsPerSecond(for: "refunds") == 1)
        #expect(sandbox.requestsPerSecond(for: "test-notification") == 0.1)
        #expect(try AppStoreAPISettings(environment: environment)?.configuration(bundleID: "b").baseURL == "https://api.storekit-sandbox.apple.com")
        for (name, value) in [
            ("SUBSYNC_APPSTORE_ENVIRONMENT", "staging"), ("SUBSYNC_APPSTORE_BASE_URL", "http://store.example.com"),
            ("SUBSYNC_APPSTORE_BASE_URL", "ftp://127.0.0.1"), ("SUBSYNC_APPSTORE_BASE_URL", "http://127.0.0.1.attacker.example"),
            ("SUBSYNC_APPSTORE_BASE_URL", "http://10.0.0.5"), ("SUBSYNC_APPSTORE_KEY_ID", ""), ("SUBSYNC_APPSTORE_ISSUER_ID", "has space"),
        ] {
            var bad = environment
            bad[name] = value
            #expect(throws: ConfigurationError.self, "\(name)=\(value)") { try AppStoreAPISettings(environment: bad) }
        }
        var local = environment
        local["SUBSYNC_APPSTORE_BASE_URL"] = "http://127.0.0.1:9999/"
        #expect(try AppStoreAPISettings(environment: local)?.baseURL == "http://127.0.0.1:9999")
        #expect(throws: ConfigurationError.self) { try AppStoreAPISettings(environment: ["SUBSYNC_APPSTORE_KEY_ID": "K1"]) }
        #expect(try AppStoreAPISettings(environment: [:]) == nil)
        var unreadable = environment
        unreadable["SUBSYNC_APPSTORE_KEY_FILE"] = "/nonexistent.p8"
        #expect(throws: ConfigurationError.self) { try AppStoreAPISettings(environment: unreadable)?.configuration(bundleID: "b") }
        unreadable["SUBSYNC_APPSTORE_KEY_FILE"] = #filePath
        #expect(throws: ConfigurationError.self) { try AppStoreAPISettings(environment: unreadable)?.configuration(bundleID: "b") }
    }
}
