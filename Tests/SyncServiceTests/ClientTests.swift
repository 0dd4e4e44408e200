import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import Postgres
import SubsyncClient
import SyncCore
import SyncService
import SyncStore
import TestSupport
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// SubsyncClient (docs/CLIENT.md) against the real service on loopback and a real database:
/// signed purchases, refusals, the outbox across a stopped service and a "crash", Retry-After,
/// and the offline answers. The client's own parts are in SubsyncClientTests.
@Suite("SubsyncClient against the service", .serialized)
struct ClientTests {
    /// A client of the service on `port`, for `account`, with a device token the test mints.
    static func client(
        _ env: TestEnvironment, port: Int, account: String, folder: URL, batchSize: Int = 100, waitMilliseconds: Int = 60_000,
        now: (@Sendable () -> Date)? = nil, sleep: (@Sendable (TimeInterval) async throws -> Void)? = nil, maximumAnswerBytes: Int? = nil
    ) throws -> SubsyncClient {
        let authenticator = env.authenticator
        var configuration = SubsyncConfiguration(
            baseURL: try #require(URL(string: "http://127.0.0.1:\(port)")), accountID: account, storageDirectory: folder,
            session: URLSession(configuration: .ephemeral),
            tokenProvider: { try await authenticator.mint(accountID: account, validFor: 3600) })
        configuration.waitMilliseconds = waitMilliseconds
        // Longer than the longest wait_ms a test asks for.
        configuration.requestTimeout = 120
        configuration.batchSize = batchSize
        configuration.platform = "ios"
        if let now { configuration.now = now }
        if let sleep { configuration.sleep = sleep }
        if let maximumAnswerBytes { configuration.maximumAnswerBytes = maximumAnswerBytes }
        return try SubsyncClient(configuration: configuration)
    }

    /// Runs `app` as `serve` does (listening on its configured port) while `body` runs, then
    /// stops it gracefully: unlike HummingbirdTesting's live mode, the port is the test's, so a
    /// service stopped and started again is found at the same address.
    static func serving<T>(_ app: some ApplicationProtocol, port: Int, _ body: () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: Void.self) { group in
            let services = ServiceGroup(configuration: .init(services: [app], logger: Logger(label: "client-tests")))
            group.addTask { try await services.run() }
            let listening = await waitUntil(seconds: 300) { (try? RawConnection(port: port)) != nil }
            #expect(listening, "the service did not listen on \(port)")
            do {
                let value = try await body()
                await services.triggerGracefulShutdown()
                try await group.waitForAll()
                return value
            } catch {
                await services.triggerGracefulShutdown()
                try? await group.waitForAll()
                throw error
            }
        }
    }

    /// The first element of `stream` that `predicate` accepts within `seconds` (a generous
    /// deadline), or nil. Call it once per stream: giving up cancels (ends) the stream.
    static func first<Element: Sendable>(
        of stream: AsyncStream<Element>, seconds: Double = 300, where predicate: @escaping @Sendable (Element) -> Bool = { _ in true }
    ) async -> Element? {
        await withTaskGroup(of: Element?.self) { group in
            group.addTask {
                for await element in stream where predicate(element) { return element }
                return nil
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(seconds))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    static func withFolder<T>(_ body: (URL) async throws -> T) async throws -> T {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("subsync-client-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        return try await body(folder)
    }

    /// One instant for the suite, so that the same purchase made twice has the same content.
    static let base = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))

    static func unsigned(_ id: String, expires: TimeInterval = 30 * 86_400, product: String = "voip.premium.monthly") -> Purchase {
        Purchase(transaction: TransactionFields(
            productID: product, originalTransactionID: id, transactionID: id, purchasedAt: base.addingTimeInterval(-3_600),
            expiresAt: base.addingTimeInterval(expires)))
    }

    /// Flushes until the outbox is empty (a restarted service may refuse the first connection).
    static func flushUntilDelivered(_ client: SubsyncClient) async throws -> Int {
        var delivered = 0
        let done = await waitUntil(seconds: 300) {
            switch await client.flush() {
            case .delivered(let count):
                delivered += count
                return true
            case .waiting(_, let count), .failed(_, let count):
                delivered += count
                return false
            }
        }
        #expect(done, "the outbox did not empty")
        return delivered
    }

    @Test("signed purchases made with our own CA are synced and read back; a tampered one is refused, reported and leaves the outbox")
    func signedPurchases() async throws {
        let authority = try TestCertificateAuthority()
        let verifier = try StoreKitVerifier(rootCertificates: [authority.root], bundleID: StoreKitTrust.bundleID, allowedEnvironments: [.production])
        try await TestEnvironment.withFresh { env in
            try await Self.withFolder { folder in
                let port = freeTCPPort()
                try await Self.serving(try env.application(requireSigned: true, verifier: verifier, port: port), port: port) {
                    let client = try Self.client(env, port: port, account: "amy", folder: folder)
                    let now = Date()
                    let good = try authority.sign(StoreKitTrust.transaction(
                        original: "1000001", purchased: now.addingTimeInterval(-3_600), expires: now.addingTimeInterval(30 * 86_400), signed: now))
                    let parts = good.split(separator: ".").map(String.init)
                    let forged = try authority.sign(StoreKitTrust.transaction(
                        original: "1000002", product: "voip.business.yearly", purchased: now, expires: now.addingTimeInterval(365 * 86_400), signed: now))
                    // The forged payload under the good signature.
                    let tampered = [parts[0], forged.split(separator: ".").map(String.init)[1], parts[2]].joined(separator: ".")

                    let outcome = try await client.sync([Purchase(signedTransaction: good), Purchase(signedTransaction: tampered)])
                    #expect(outcome == .delivered(1))
                    #expect(await client.pendingCount == 0)
                    let refusal = await Self.first(of: client.errors)
                    guard case .refused(let kind, let key, let status, let code, _) = refusal else {
                        Issue.record("expected a refusal, got \(String(describing: refusal))")
                        return
                    }
                    #expect(kind == "report")
                    #expect(key == Purchase(signedTransaction: tampered).reportID)
                    #expect(status == 422)
                    #expect(code == "bad_signature")

                    // The sync answer carried the state the purchase made; a refresh reads the same.
                    #expect(await client.tier() == "premium")
                    #expect(await client.canUse("video_calling"))
                    let read = try await client.refresh()
                    #expect(read.entitlements.map(\.status) == ["active"])
                    #expect(read.usage?.first?.meter == "minutes")
                    // The same purchase again is a duplicate, not a second report.
                    _ = try await client.sync([Purchase(signedTransaction: good)])
                    #expect(try await env.scalar("SELECT count(*) FROM reports WHERE account_id = 'amy'") == 1)
                }
            }
        }
    }

    @Test("with the service stopped, reports wait in the outbox; a new client on the same folder (a crash) sends them once it is back")
    func outboxOutlivesTheServiceAndTheProcess() async throws {
        try await TestEnvironment.withFresh { env in
            try await Self.withFolder { folder in
                let port = freeTCPPort()
                try await Self.serving(try env.application(port: port), port: port) {
                    let client = try Self.client(env, port: port, account: "bea", folder: folder)
                    #expect(try await client.sync([Self.unsigned("t1")]) == .delivered(1))
                    #expect(await client.tier() == "premium")
                }
                // The service is down.
                let before = try Self.client(env, port: port, account: "bea", folder: folder)
                let offline = try await before.sync([Self.unsigned("t2"), Self.unsigned("t3", product: "voip.business.monthly")])
                guard case .failed(.unreachable, 0) = offline else {
                    Issue.record("expected unreachable, got \(offline)")
                    return
                }
                #expect(await before.pendingCount == 2)
                #expect(await before.tier() == "premium", "the cached state answers while offline")

                // The app is killed; a new process opens the same folder once the service is back.
                try await Self.serving(try env.application(port: port), port: port) {
                    let after = try Self.client(env, port: port, account: "bea", folder: folder)
                    #expect(await after.pendingCount == 2)
                    #expect(try await Self.flushUntilDelivered(after) == 2)
                    #expect(await after.pendingCount == 0)
                    #expect(await after.tier() == "business")
                    // Sent again (a restore): duplicates, nothing twice.
                    _ = try await after.restore([Self.unsigned("t1")])
                    let ids = try await env.pool.query("SELECT report_id FROM reports WHERE account_id = 'bea'").map { try $0.decode(String.self, at: 0) }
                    #expect(ids.count == 3)
                    #expect(Set(ids) == Set(["t1", "t2"].map { Self.unsigned($0).reportID } + [Self.unsigned("t3", product: "voip.business.monthly").reportID]))
                }
            }
        }
    }

    @Test("429 with Retry-After: the client sends nothing before the time the service named, then delivers the rest")
    func honoursRetryAfter() async throws {
        try await TestEnvironment.withFresh { env in
            try await Self.withFolder { folder in
                let port = freeTCPPort()
                // One request per 50 s: the second request comes before the bucket refills even
                // after a long stall of a busy core (with 10 s, a stall delivered both at once).
                let limit = RateLimiter.Limit(ratePerSecond: 0.02, burst: 1)
                try await Self.serving(try env.application(accountRateLimit: limit, port: port), port: port) {
                    let client = try Self.client(env, port: port, account: "cal", folder: folder, batchSize: 1, waitMilliseconds: 0)
                    let started = Date()
                    let outcome = try await client.sync([Self.unsigned("r1"), Self.unsigned("r2")])
                    guard case .waiting(let until, 1) = outcome else {
                        Issue.record("expected to wait after one delivery, got \(outcome)")
                        return
                    }
                    #expect(until.timeIntervalSince(started) >= 25, "Retry-After of a 0.02/s bucket is tens of seconds")
                    // Asking again before then sends nothing.
                    let early = await client.flush()
                    #expect(early == .waiting(until: until, delivered: 0))
                    #expect(try await env.scalar("SELECT count(*) FROM reports WHERE account_id = 'cal'") == 1)
                    try await Task.sleep(for: .seconds(max(0, until.timeIntervalSinceNow) + 0.1))
                    #expect(try await Self.flushUntilDelivered(client) == 1)
                    #expect(try await env.scalar("SELECT count(*) FROM reports WHERE account_id = 'cal'") == 2)
                }
            }
        }
    }

    @Test("offline, canUse follows the cached expiry: the subscription lapses on time without the service, and stateChanges told of it")
    func offlineExpiryFromTheService() async throws {
        try await TestEnvironment.withFresh { env in
            try await Self.withFolder { folder in
                let port = freeTCPPort()
                // The clock starts at the purchase's own instant (`base`, fixed when the suite first
                // reads it), so 3,601 s later is always past its expiry, however long the set-up took.
                let clock = ManualClock(start: Self.base)
                try await Self.serving(try env.application(port: port), port: port) {
                    let client = try Self.client(env, port: port, account: "dan", folder: folder, now: { clock.now() })
                    _ = try await client.sync([Self.unsigned("s1", expires: 3_600)])
                    _ = try await client.refresh()
                    #expect(await Self.first(of: client.stateChanges)?.tier == "premium")
                }
                // Offline from here on: a new client reads the cache. Its run loop waits for the
                // cached expiry (short real waits here, on the test's clock) to tell stateChanges.
                let client = try Self.client(env, port: port, account: "dan", folder: folder, now: { clock.now() }, sleep: { _ in
                    try await Task.sleep(for: .milliseconds(20))
                })
                let loop = Task { await client.run() }
                defer { loop.cancel() }
                #expect(await client.canUse("video_calling"))
                #expect(await client.limit("monthly_minutes") == .unlimited)
                clock.advance(by: .seconds(3_601))
                #expect(await client.canUse("video_calling") == false)
                #expect(await client.canUse("basic_calling"))
                #expect(await client.tier() == "free")
                #expect(await client.limit("monthly_minutes") == .limited(100))
                #expect(await client.entitlements().map(\.status) == ["expired"])
                let lapse = await Self.first(of: client.stateChanges) { $0.tier == "free" }
                #expect(lapse?.features.contains("video_calling") == false, "stateChanges did not tell of the lapse")
            }
        }
    }

    @Test("usage goes through the outbox and holds are reserved and settled against the service")
    func usageAndHolds() async throws {
        try await TestEnvironment.withFresh { env in
            try await Self.withFolder { folder in
                let port = freeTCPPort()
                try await Self.serving(try env.application(port: port), port: port) {
                    let client = try Self.client(env, port: port, account: "eli", folder: folder)
                    let call = recentlyThisMonth(60)
                    #expect(try await client.reportUsage(meter: "minutes", units: 90, id: "call-1", at: call) == .delivered(1))
                    #expect(try await client.reportUsage(meter: "minutes", units: 90, id: "call-1", at: call) == .delivered(1), "the same call again is a duplicate")
                    let hold = try #require(try await client.reserve(meter: "minutes", units: 30))
                    #expect(hold.units == 10)
                    #expect(try await client.reserve(meter: "minutes", units: 1) == nil, "nothing left: usage_exhausted")
                    #expect(try await client.settle(hold, units: 12) == .delivered(1))
                    #expect(try await client.reportUsage(meter: "sms", units: 1, id: "x") == .delivered(0))
                    let refusal = await Self.first(of: client.errors)
                    #expect(refusal.map { if case .refused(_, _, 422, "unknown_meter", _) = $0 { true } else { false } } == true, "\(String(describing: refusal))")
                    let read = try await client.refresh()
                    #expect(read.usage?.first?.used == 102)
                    #expect(read.usage?.first?.overageUnits == 2)
                    #expect(try await env.scalar("SELECT count(*) FROM usage_entries WHERE account_id = 'eli' AND kind = 'usage'") == 2)
                }
            }
        }
    }
}

/// One item the service keeps failing on (a 500 for it alone) must not hold up the others. The
/// real service has no such item on purpose, so a small HTTP server on loopback plays one.
@Suite("SubsyncClient: an item the service keeps failing on")
struct ClientPoisonItemTests {
    actor Seen {
        var bodies: [String] = []
        func add(_ body: String) { bodies.append(body) }
    }

    @Test("after three server errors in a row the item waits its backoff while the rest of the outbox is delivered")
    func poisonItemDoesNotBlockTheOutbox() async throws {
        let seen = Seen()
        let router = Router()
        router.post("v1/accounts/:account/sync") { request, _ -> Response in
            let body = String(buffer: try await request.body.collect(upTo: 1 << 20))
            await seen.add(body)
            let status: HTTPResponse.Status = body.contains("poison") ? .internalServerError : .accepted
            return Response(status: status, headers: [.contentType: "application/json"],
                            body: .init(byteBuffer: ByteBuffer(string: status == .accepted ? "{}" : "{\"error\": {\"code\": \"internal\", \"message\": \"boom\"}}")))
        }
        let port = freeTCPPort()
        let server = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
        try await ClientTests.withFolder { folder in
            try await ClientTests.serving(server, port: port) {
                var configuration = SubsyncConfiguration(
                    baseURL: try #require(URL(string: "http://127.0.0.1:\(port)")), accountID: "pia", storageDirectory: folder,
                    session: URLSession(configuration: .ephemeral), tokenProvider: { "token" })
                configuration.batchSize = 1
                configuration.requestTimeout = 120
                // A long first backoff: the item set aside stays aside for the rest of the test.
                configuration.initialBackoff = 120
                let client = try SubsyncClient(configuration: configuration)
                func purchase(_ id: String) -> Purchase {
                    Purchase(transaction: TransactionFields(
                        productID: "voip.premium.monthly", originalTransactionID: id, transactionID: id, purchasedAt: ClientTests.base))
                }
                let first = try await client.sync([purchase("poison"), purchase("good-1"), purchase("good-2")])
                #expect(first == .failed(.service(status: 500, code: "internal", message: "boom"), delivered: 0))
                #expect(await client.flush() == .failed(.service(status: 500, code: "internal", message: "boom"), delivered: 0))
                // The third failure in a row sets the item aside for its backoff: the others go.
                #expect(await client.flush() == .failed(.service(status: 500, code: "internal", message: "boom"), delivered: 2))
                #expect(await client.pendingCount == 1)
                let bodies = await seen.bodies
                #expect(bodies.filter { $0.contains("poison") }.count == 3)
                #expect(bodies.filter { $0.contains("good-1") }.count == 1)
                #expect(bodies.filter { $0.contains("good-2") }.count == 1)
                // Still waiting its backoff: nothing is sent now, the item stays in the outbox.
                _ = await client.flush()
                #expect(await seen.bodies.count == bodies.count)
                #expect(await client.pendingCount == 1)
            }
        }
    }
}
