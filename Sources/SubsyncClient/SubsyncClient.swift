import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What an app calls instead of hand-written HTTP (docs/CLIENT.md): it turns StoreKit 2
/// material into reports, keeps them in a durable outbox until the service has them, caches the
/// account's resolved state on disk, and answers feature and limit questions offline.
///
/// ```swift
/// let client = try SubsyncClient(configuration: .init(
///     baseURL: URL(string: "https://sync.example.com")!, accountID: user.id,
///     tokenProvider: { try await backend.subsyncToken() }))
/// Task { await client.run() }                       // sends the outbox whenever it can
/// try await client.sync([Purchase(signedTransaction: verification.jwsRepresentation)])
/// if await client.canUse("video_calls") { ... }     // offline too, honouring expiry dates
/// ```
///
/// One client per storage folder at a time. The outbox keeps every item until the service has
/// it: reports are sent in batches of at most 100, usage in batches of 500, with backoff and
/// jitter, honouring `Retry-After` on 429 and 503. An item the service refuses for good (422, 409,
/// 400, ...) leaves the outbox and is reported on ``errors``: never retried forever, never
/// dropped silently.
public actor SubsyncClient {
    public nonisolated let configuration: SubsyncConfiguration
    /// This install's device id (from the configuration, or made once and kept on disk).
    public nonisolated let deviceID: String
    /// Every change of the account's state the service tells the client (one consumer).
    public nonisolated let stateChanges: AsyncStream<AccountSnapshot>
    /// Items refused for good, refused credentials and unreadable files (one consumer).
    public nonisolated let errors: AsyncStream<SubsyncClientError>

    private let stateContinuation: AsyncStream<AccountSnapshot>.Continuation
    private let errorContinuation: AsyncStream<SubsyncClientError>.Continuation
    /// ``run()`` waiting for something to send, and a signal that came while nobody waited.
    private var workWaiter: CheckedContinuation<Void, Never>?
    private var workPending = false
    private var outbox: Outbox
    private var store: StateStore
    private let transport: HTTPTransport
    private var token: String?
    /// Nothing is sent before this (a `Retry-After`).
    private var notBefore: Date?
    private var flushing = false
    /// Whether ``run()`` is running (one loop per client).
    private var running = false
    /// Server errors (5xx, 408) in a row per item, and items passed over until a time because
    /// they keep getting them: one item the service cannot take must not hold up the others.
    private var serverFailures: [String: Int] = [:]
    private var deferredUntil: [String: Date] = [:]
    /// The state ``stateChanges`` last gave.
    private var lastEmitted: AccountSnapshot?
    private var flushWaiters: [CheckedContinuation<FlushOutcome, Never>] = []

    /// Opens the storage folder (creating it) and loads the outbox and the cached state. An
    /// unreadable file is moved aside and reported on ``errors``; only a folder that cannot be
    /// written throws.
    public init(configuration: SubsyncConfiguration) throws {
        if let problem = configuration.baseURLProblem { throw SubsyncClientError.invalidInput(problem) }
        self.configuration = configuration
        let folder = configuration.storageDirectory
        if folder == SubsyncConfiguration.defaultStorage(accountID: configuration.accountID),
            let legacy = SubsyncConfiguration.legacyStorage(accountID: configuration.accountID) {
            Self.adopt(legacy: legacy, as: folder, accountID: configuration.accountID)
        }
        var outbox = try Outbox(directory: folder.appendingPathComponent("outbox"))
        let problems = try outbox.load()
        DurableFile.removeLeftovers(in: folder, of: ["state.json", "device-id"])
        var store = StateStore(url: folder.appendingPathComponent("state.json"))
        let stateProblem = store.load()
        self.outbox = outbox
        self.store = store
        self.deviceID = try configuration.deviceID ?? Self.storedDeviceID(in: folder)
        self.transport = HTTPTransport(configuration: configuration)
        (stateChanges, stateContinuation) = AsyncStream.makeStream(of: AccountSnapshot.self, bufferingPolicy: .bufferingNewest(16))
        // Unbounded: a refusal is the only trace of an item that left the outbox.
        (errors, errorContinuation) = AsyncStream.makeStream(of: SubsyncClientError.self, bufferingPolicy: .unbounded)
        for problem in problems + (stateProblem.map { [$0] } ?? []) { errorContinuation.yield(problem) }
    }

    deinit {
        stateContinuation.finish()
        errorContinuation.finish()
    }

    // MARK: Purchases

    /// Reports `purchases` (each under an id derived from its content, so sending one again is a
    /// duplicate, never a second report): written to the outbox first, then sent now if the
    /// service is reachable. The answer carries the state the reports make.
    @discardableResult
    public func sync(_ purchases: [Purchase]) async throws -> FlushOutcome {
        try enqueue(purchases)
        return await flush()
    }

    /// Writes `purchases` to the outbox and wakes ``run()``, without waiting for the network.
    func enqueue(_ purchases: [Purchase]) throws {
        for purchase in purchases where purchase.signedTransaction == nil && purchase.transaction == nil {
            throw SubsyncClientError.invalidInput("a purchase needs its signed transaction (jwsRepresentation) or its fields")
        }
        let now = configuration.now()
        for purchase in purchases {
            try outbox.append(kind: .report, key: purchase.reportID, now: now) { $0.report = WireReport(purchase, observedAt: now) }
        }
        signalWork()
    }

    /// Re-sends everything current (what `AppStore.sync()` and `Transaction.currentEntitlements`
    /// give), then reads the state back.
    @discardableResult
    public func restore(_ purchases: [Purchase]) async throws -> FlushOutcome {
        let outcome = try await sync(purchases)
        if case .delivered = outcome { _ = try? await refresh() }
        return outcome
    }

    // MARK: Usage

    /// Reports `units` of `meter` used (a call's minutes) under the device's own `id` for it (a
    /// call id): through the outbox, so usage made offline arrives when the device is back, once.
    @discardableResult
    public func reportUsage(meter: String, units: Int, id: String, at: Date? = nil) async throws -> FlushOutcome {
        guard units > 0 else { throw SubsyncClientError.invalidInput("units must be positive, got \(units)") }
        let now = configuration.now()
        let usage = WireUsage(id: id, meter: meter, units: units, at: at ?? now)
        try outbox.append(kind: .usage, key: "usage:\(id)", now: now) { $0.usage = usage }
        signalWork()
        return await flush()
    }

    /// Reserves up to `units` of `meter` before spending them (online only: a hold is a question
    /// to the service). `nil` when nothing is left (`usage_exhausted`).
    public func reserve(meter: String, units: Int, ttl: TimeInterval = 300) async throws -> Hold? {
        guard ttl.isFinite, ttl >= 1, ttl <= 3_600 else { throw SubsyncClientError.invalidInput("ttl must be 1 to 3600 seconds, got \(ttl)") }
        guard units > 0 else { throw SubsyncClientError.invalidInput("units must be positive, got \(units)") }
        let body = try WireFormat.encoder().encode(
            HoldBody(device: device, meter: meter, units: units, ttlSeconds: Int(ttl.rounded())))
        let answer = try await request("POST", "v1/accounts/\(configuration.accountID)/usage/holds", body: body)
        switch answer.status {
        case 200..<300:
            do {
                return try WireFormat.decoder().decode(HoldAnswer.self, from: answer.body).hold
            } catch {
                throw SubsyncClientError.service(status: answer.status, code: "unreadable_answer", message: "\(error)")
            }
        case 409 where answer.error.code == "usage_exhausted":
            return nil
        case 429, 503:
            throw SubsyncClientError.retryLater(until: configuration.now().addingTimeInterval(answer.retryAfter ?? configuration.initialBackoff))
        default:
            throw SubsyncClientError.service(status: answer.status, code: answer.error.code, message: answer.error.message)
        }
    }

    /// Settles `hold` with the units actually used, through the outbox (a settle must reach the
    /// service even if the call ended offline).
    @discardableResult
    public func settle(_ hold: Hold, units: Int, at: Date? = nil) async throws -> FlushOutcome {
        let now = configuration.now()
        try outbox.append(kind: .settle, key: "settle:\(hold.id)", now: now) {
            $0.holdID = hold.id
            $0.settleUnits = units
            $0.settleAt = at ?? now
        }
        signalWork()
        return await flush()
    }

    /// Releases `hold` unused, through the outbox.
    @discardableResult
    public func release(_ hold: Hold) async throws -> FlushOutcome {
        try outbox.append(kind: .release, key: "release:\(hold.id)", now: configuration.now()) { $0.holdID = hold.id }
        signalWork()
        return await flush()
    }

    // MARK: Rewarded ads

    /// A reward token for the next rewarded ad: pass it as `customData` in AdMob's
    /// `ServerSideVerificationOptions` (with the account id as `userID`), so the service credits
    /// the reward to this account only, once (docs/CLIENT.md, *Minutes and credits*). Good for a
    /// day; fetch one per ad.
    public func rewardToken() async throws -> String {
        let answer = try await request("POST", "v1/accounts/\(configuration.accountID)/rewards/token", body: Data("{}".utf8))
        guard (200..<300).contains(answer.status) else { throw failure(answer) }
        struct Issued: Decodable { var token: String }
        do {
            return try WireFormat.decoder().decode(Issued.self, from: answer.body).token
        } catch {
            throw SubsyncClientError.service(status: answer.status, code: "unreadable_answer", message: "\(error)")
        }
    }

    // MARK: State

    /// Reads the account's state and the catalogue's tiers from the service and caches them.
    @discardableResult
    public func refresh() async throws -> AccountSnapshot {
        let account = try await request("GET", "v1/accounts/\(configuration.accountID)")
        guard (200..<300).contains(account.status) else { throw failure(account) }
        let catalogue = try await request("GET", "v1/catalogue")
        guard (200..<300).contains(catalogue.status) else { throw failure(catalogue) }
        do {
            let decoder = WireFormat.decoder()
            var contents = store.contents
            contents.tiers = try decoder.decode(CatalogueAnswer.self, from: catalogue.body).tiers
            let snapshot = try decoder.decode(AccountSnapshot.self, from: account.body)
            try apply(snapshot, to: &contents)
            return state() ?? snapshot
        } catch let error as SubsyncClientError {
            throw error
        } catch {
            throw SubsyncClientError.service(status: account.status, code: "unreadable_answer", message: "\(error)")
        }
    }

    /// The account's state now: the cached one, with every entitlement whose access end has
    /// passed since counted as expired and the tier, features, limits and ads worked out again
    /// from the cached tiers. `nil` before the service has answered once.
    public func state() -> AccountSnapshot? {
        guard var account = store.contents.account else { return nil }
        let now = configuration.now()
        // Every entitlement that said it granted access and whose end has passed: since the
        // answer came, or already when the service answered (its stored state is resolved again
        // by its sweeper, which may not have run yet), or by a device clock running ahead.
        func lapsed(_ entitlement: EntitlementSnapshot) -> Bool {
            (entitlement.status == "active" || entitlement.status == "grace_period") && !entitlement.grantsAccess(at: now)
        }
        guard account.entitlements.contains(where: lapsed) else { return account }
        for index in account.entitlements.indices where lapsed(account.entitlements[index]) {
            account.entitlements[index].status = "expired"
        }
        let granting = Set(account.entitlements.filter { $0.grantsAccess(at: now) }.map(\.tier))
        if let tiers = store.contents.tiers?.sorted(by: { $0.rank < $1.rank }), let base = tiers.first {
            let tier = tiers.last { granting.contains($0.id) } ?? base
            account.tier = tier.id
            account.features = tier.features
            account.limits = tier.limits
            account.ads = tier.ads
        } else {
            // Without the tiers the tier below is unknown: nothing paid is granted any more.
            account.features = []
            account.limits = [:]
        }
        return account
    }

    /// The account's tier now (offline too); `nil` before the service has answered once.
    public func tier() -> String? { state()?.tier }

    /// Whether the account's tier includes `feature` now (offline too; `false` before the service
    /// has answered once).
    public func canUse(_ feature: String) -> Bool { state()?.features.contains(feature) ?? false }

    /// The account's limit `name` now (offline too).
    public func limit(_ name: String) -> Limit? { state()?.limits[name] }

    /// The account's entitlements now, an expired one marked `expired` (offline too).
    public func entitlements() -> [EntitlementSnapshot] { state()?.entitlements ?? [] }

    /// Items waiting in the outbox.
    public var pendingCount: Int { outbox.count }

    // MARK: Sending

    /// Sends what waits in the outbox, oldest first, until it is empty or something stops it.
    /// A flush already running takes the new items too: a second caller waits for it.
    @discardableResult
    public func flush() async -> FlushOutcome {
        if flushing {
            return await withCheckedContinuation { flushWaiters.append($0) }
        }
        flushing = true
        let outcome = await drain()
        flushing = false
        let waiters = flushWaiters
        flushWaiters = []
        for waiter in waiters { waiter.resume(returning: outcome) }
        return outcome
    }

    /// Keeps the outbox moving until the task is cancelled: sends when there is something to
    /// send, backs off with jitter after failures (doubling up to `maximumBackoff`), waits out
    /// `Retry-After`, and wakes when a cached entitlement expires so ``stateChanges`` hears of it.
    public func run() async {
        // One loop per client: a second call returns at once.
        guard !running else { return }
        running = true
        defer { running = false }
        var failures = 0
        while !Task.isCancelled {
            // The expiry to wake for is read before the state is emitted: if the clock passes it
            // in between, the emitted state may still grant access, but the wait is then for an
            // instant already past and the next turn emits the lapse. Read after, a lapse that
            // came in between left no expiry to wake for, and nothing told stateChanges of it.
            let lapse = nextExpiry()
            emitIfChanged()
            if outbox.isEmpty {
                await waitForWork(orUntil: lapse)
                continue
            }
            let wait: TimeInterval
            switch await flush() {
            case .delivered:
                failures = 0
                continue
            case .waiting(let until, _):
                failures += 1
                wait = max(until.timeIntervalSince(configuration.now()), backoff(failures) / 2) + Double.random(in: 0...0.25)
            case .failed:
                failures += 1
                wait = backoff(failures)
            }
            // Woken early by an expiry, so stateChanges hears of it on time.
            let expiry = nextExpiry().map { max(0, $0.timeIntervalSince(configuration.now())) + 0.001 }
            try? await configuration.sleep(min(wait, expiry ?? wait))
        }
    }

    /// The wait after `failures` failures in a row: doubling from `initialBackoff` up to
    /// `maximumBackoff`, with jitter (between half and all of it).
    private func backoff(_ failures: Int) -> TimeInterval {
        let initial = configuration.initialBackoff.isFinite ? max(0.01, configuration.initialBackoff) : 1
        let maximum = configuration.maximumBackoff.isFinite ? max(initial, configuration.maximumBackoff) : 300
        let ceiling = min(maximum, initial * pow(2, Double(min(max(0, failures - 1), 30))))
        return Double.random(in: (ceiling / 2)...ceiling)
    }

    private func drain() async -> FlushOutcome {
        var delivered = 0
        // Keys of a refused batch, sent one by one to find the item that was refused.
        var isolate: Set<String> = []
        while true {
            let now = configuration.now()
            if let notBefore, notBefore > now { return .waiting(until: notBefore, delivered: delivered) }
            deferredUntil = deferredUntil.filter { $0.value > now }
            var batch = outbox.nextBatch(limit: configuration.batchSize, skipping: Set(deferredUntil.keys))
            guard let first = batch.first else {
                if let error = lastServerError, !outbox.isEmpty { return .failed(error, delivered: delivered) }
                return .delivered(delivered)
            }
            if isolate.contains(first.key) { batch = [first] }
            let result = await send(batch)
            switch result {
            case .delivered(let account):
                for item in batch {
                    serverFailures[item.key] = nil
                    deferredUntil[item.key] = nil
                }
                if deferredUntil.isEmpty { lastServerError = nil }
                do {
                    try outbox.remove(batch)
                    if let account {
                        var contents = store.contents
                        try apply(account, to: &contents)
                    }
                } catch {
                    return .failed(error, delivered: delivered)
                }
                delivered += batch.count
            case .refused(let status, let code, let message):
                if batch.count > 1 {
                    isolate.formUnion(batch.map(\.key))
                    continue
                }
                errorContinuation.yield(.refused(kind: first.kind.rawValue, key: first.key.split(separator: ":", maxSplits: 1).last.map(String.init) ?? first.key,
                                                 status: status, code: code, message: message))
                do { try outbox.remove(batch) } catch { return .failed(error, delivered: delivered) }
            case .retryAfter(let seconds):
                let until = configuration.now().addingTimeInterval(seconds)
                notBefore = until
                return .waiting(until: until, delivered: delivered)
            case .failed(let error):
                if case .unauthorized = error { errorContinuation.yield(error) }
                // An answer over maximumAnswerBytes is no outage: the app hears of it.
                if case .answerTooLarge = error { errorContinuation.yield(error) }
                guard case .service(let status, _, _) = error, status >= 500 || status == 408 else {
                    return .failed(error, delivered: delivered)
                }
                // After three server errors in a row, these items wait their backoff while the
                // rest of the outbox goes on: if the others go through, the service can take
                // everything but these; if the others fail too, it is down, and drain stops.
                lastServerError = error
                let failures = batch.map { item -> Int in
                    serverFailures[item.key, default: 0] += 1
                    return serverFailures[item.key] ?? 1
                }.min() ?? 1
                guard failures >= 3 else { return .failed(error, delivered: delivered) }
                let until = configuration.now().addingTimeInterval(backoff(failures - 2))
                for item in batch { deferredUntil[item.key] = until }
            }
        }
    }

    /// The last server error that made items wait (see `deferredUntil`).
    private var lastServerError: SubsyncClientError?

    private enum BatchResult {
        case delivered(AccountSnapshot?)
        case refused(status: Int, code: String, message: String)
        case retryAfter(TimeInterval)
        case failed(SubsyncClientError)
    }

    private func send(_ batch: [OutboxItem]) async -> BatchResult {
        guard let first = batch.first else { return .delivered(nil) }
        let account = "v1/accounts/\(configuration.accountID)"
        let answer: HTTPTransport.Answer
        do {
            let encoder = WireFormat.encoder()
            switch first.kind {
            case .report:
                answer = try await request(
                    "POST", "\(account)/sync", query: [URLQueryItem(name: "wait_ms", value: String(configuration.waitMilliseconds))],
                    body: try encoder.encode(SyncBody(device: device, reports: batch.compactMap(\.report))))
            case .usage:
                answer = try await request("POST", "\(account)/usage", body: try encoder.encode(UsageBody(device: device, usage: batch.compactMap(\.usage))))
            case .settle:
                answer = try await request(
                    "POST", "\(account)/usage/holds/\(first.holdID ?? "-")/settle",
                    body: try encoder.encode(SettleBody(units: first.settleUnits ?? 0, at: first.settleAt ?? first.enqueuedAt)))
            case .release:
                answer = try await request("DELETE", "\(account)/usage/holds/\(first.holdID ?? "-")")
            }
        } catch let error as SubsyncClientError {
            return .failed(error)
        } catch {
            return .failed(.invalidInput("\(error)"))
        }
        switch answer.status {
        case 200..<300:
            guard first.kind == .report else { return .delivered(nil) }
            return .delivered(try? WireFormat.decoder().decode(SyncAnswer.self, from: answer.body).account)
        case 401, 403:
            return .failed(.unauthorized(status: answer.status, code: answer.error.code, message: answer.error.message))
        case 429, 503:
            notBefore = nil
            return .retryAfter(answer.retryAfter ?? backoff(1))
        case 409, 422:
            // The service's verdict on what was sent (a signature, a binding, a usage id).
            return .refused(status: answer.status, code: answer.error.code, message: answer.error.message)
        case let status where [400, 404, 413].contains(status) && answer.isServiceError && Self.isItemLevel(answer, kind: first.kind):
            return .refused(status: answer.status, code: answer.error.code, message: answer.error.message)
        default:
            // Anything else is not about the items (a wrong base URL, a proxy, a configuration
            // the service refuses, a 5xx): they wait, and the app hears of it.
            let error = SubsyncClientError.service(status: answer.status, code: answer.error.code, message: answer.error.message)
            if (400..<500).contains(answer.status) && answer.status != 408 { errorContinuation.yield(error) }
            return .failed(error)
        }
    }

    /// Whether a 400, 404 or 413 is about the item sent rather than the request as a whole: a
    /// body too large (a batch is split first), a field of the report or usage named in the
    /// message, or a hold the service does not know.
    private static func isItemLevel(_ answer: HTTPTransport.Answer, kind: OutboxItem.Kind) -> Bool {
        switch answer.status {
        case 413: true
        case 404: (kind == .settle || kind == .release) && answer.error.code == "hold_not_found"
        default: answer.error.message.hasPrefix("reports[") || answer.error.message.hasPrefix("usage[")
        }
    }

    /// One request with the account token; a 401 asks the token provider once more.
    private func request(_ method: String, _ path: String, query: [URLQueryItem] = [], body: Data? = nil) async throws(SubsyncClientError) -> HTTPTransport.Answer {
        var answer = try await transport.send(method, path, query: query, body: body, token: try await currentToken())
        if answer.status == 401 {
            token = nil
            answer = try await transport.send(method, path, query: query, body: body, token: try await currentToken())
        }
        return answer
    }

    private func currentToken() async throws(SubsyncClientError) -> String {
        if let token { return token }
        do {
            let fresh = try await configuration.tokenProvider()
            token = fresh
            return fresh
        } catch {
            throw .unauthorized(status: 0, code: "token_provider_failed", message: "\(error)")
        }
    }

    private func failure(_ answer: HTTPTransport.Answer) -> SubsyncClientError {
        switch answer.status {
        case 401, 403: .unauthorized(status: answer.status, code: answer.error.code, message: answer.error.message)
        case 429, 503: .retryLater(until: configuration.now().addingTimeInterval(answer.retryAfter ?? configuration.initialBackoff))
        default: .service(status: answer.status, code: answer.error.code, message: answer.error.message)
        }
    }

    /// Stores `account` as the last known state (keeping the balances a sync answer lacks) and
    /// tells ``stateChanges`` when it differs.
    private func apply(_ account: AccountSnapshot, to contents: inout StateStore.Contents) throws(SubsyncClientError) {
        var account = account
        account.receivedAt = configuration.now()
        if account.usage == nil { account.usage = contents.account?.usage }
        contents.account = account
        try store.save(contents)
        emitIfChanged()
    }

    /// Gives ``stateChanges`` the state now when it differs from what it gave last (a new
    /// answer from the service, or an expiry passing offline).
    private func emitIfChanged() {
        guard let current = state() else { return }
        if let lastEmitted, Self.sameState(lastEmitted, current) { return }
        lastEmitted = current
        stateContinuation.yield(current)
    }

    private static func sameState(_ a: AccountSnapshot, _ b: AccountSnapshot) -> Bool {
        var a = a
        var b = b
        a.receivedAt = nil
        b.receivedAt = nil
        return a == b
    }

    private var device: WireDevice {
        WireDevice(id: deviceID, platform: configuration.platform, appVersion: configuration.appVersion)
    }

    /// The next moment a cached entitlement stops granting access.
    private func nextExpiry() -> Date? {
        let now = configuration.now()
        return store.contents.account?.entitlements.compactMap { $0.grantsAccess(at: now) ? $0.expiresAt : nil }.min()
    }

    /// Returns when something is enqueued, at `deadline`, or when the task is cancelled.
    private func waitForWork(orUntil deadline: Date?) async {
        let sleep = configuration.sleep
        let seconds = deadline.map { max(0, $0.timeIntervalSince(configuration.now())) + 0.001 }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withTaskCancellationHandler {
                    await self.awaitWork()
                } onCancel: {
                    Task { await self.signalWork() }
                }
            }
            if let seconds {
                group.addTask { try? await sleep(seconds) }
            }
            await group.next()
            group.cancelAll()
        }
    }

    private func awaitWork() async {
        if workPending {
            workPending = false
            return
        }
        await withCheckedContinuation { workWaiter = $0 }
    }

    private func signalWork() {
        if let waiter = workWaiter {
            workWaiter = nil
            waiter.resume()
        } else {
            workPending = true
        }
    }

    /// Moves the folder an earlier release used for this account (``SubsyncConfiguration/legacyStorage(accountID:base:)``)
    /// to its new place, so that its outbox, state and device id go on: only when its cached
    /// state names this account (that name was also the folder of the account whose id it is,
    /// `a_b` for `a:b`, whose queued items must never be sent as another account's), and the new
    /// folder does not exist yet.
    static func adopt(legacy: URL, as folder: URL, accountID: String) {
        let files = FileManager.default
        guard files.fileExists(atPath: legacy.path), !files.fileExists(atPath: folder.path),
            let state = try? StateStore.read(legacy.appendingPathComponent("state.json")),
            state.account?.accountID == accountID
        else { return }
        try? files.moveItem(at: legacy, to: folder)
    }

    private static func storedDeviceID(in folder: URL) throws(SubsyncClientError) -> String {
        let url = folder.appendingPathComponent("device-id")
        if let text = try? String(contentsOf: url, encoding: .utf8) {
            let id = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if !id.isEmpty, id.count <= 128 { return id }
        }
        let id = "d-" + UUID().uuidString.lowercased()
        do {
            try DurableFile.store(Data(id.utf8), at: url)
        } catch {
            throw .storage(path: url.path, reason: "\(error)")
        }
        return id
    }
}
