import Curl
import Foundation
import Logging
import Metrics
import Postgres
import ServiceLifecycle
import SyncCore
import SyncStore

/// Sends due webhook deliveries through libcurl and records every attempt.
///
/// Each round claims a batch of due deliveries (leased, so a crash only delays them), sends
/// them concurrently across streams (an account's deliveries to one endpoint) but one after
/// another within a stream, in sequence order, stopping a stream at its first failure, and
/// records the results in one transaction. A stream's next event is never sent before the
/// previous one succeeded, died or was cancelled, whichever process sends it. Wakes on NOTIFY
/// from the resolution workers (`wakeups`, raised by the process's ``NotificationForwarder``) and
/// polls as a fallback. Signing, retries, 410 and endpoint health: docs/WEBHOOKS.md.
public struct DeliveryWorker: Service {
    public struct Configuration: Sendable {
        public var batchSize: Int = 500
        public var schedule: RetrySchedule = .standard
        /// How long a claimed delivery is reserved for its sender, so a sender that dies only
        /// delays it this long. Default (nil): 20 attempt timeouts, between 30 s and 2 minutes.
        public var lease: TimeInterval?
        /// An endpoint whose every delivery failed for this long is disabled.
        public var disableAfter: TimeInterval = 5 * 86_400
        public var connectTimeout: Duration = .seconds(5)
        public var totalTimeout: Duration = .seconds(15)
        public var pollInterval: Duration = .seconds(1)
        /// How often a loop sets the due deliveries waiting behind a retrying one to wait for
        /// that retry (`DeliveryStore.holdBlocked`).
        public var holdInterval: Duration = .seconds(10)
        /// This loop's share of the accounts: (index, count) over the process's delivery loops.
        public var partition: (index: Int, count: Int) = (0, 1)

        public init() {}

        var effectiveLease: TimeInterval {
            if let lease { return lease }
            return min(120, max(30, 20 * timeoutSeconds))
        }

        var timeoutSeconds: TimeInterval {
            totalTimeout.timeInterval
        }
    }

    let store: DeliveryStore
    let client: CurlClient
    let configuration: Configuration
    /// Attempt times, the retry schedule, leases and the hold interval.
    let clock: any ServiceClock
    let wakeups: WakeSignal
    let logger: Logger

    public init(
        store: DeliveryStore,
        client: CurlClient,
        wakeups: WakeSignal = WakeSignal(),
        configuration: Configuration,
        clock: any ServiceClock = SystemClock(),
        logger: Logger
    ) {
        self.clock = clock
        self.store = store
        self.client = client
        self.configuration = configuration
        self.wakeups = wakeups
        self.logger = logger
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            await deliverLoop()
        }
        client.shutdown()
    }

    private func deliverLoop() async {
        var lastHold = clock.uptime()
        await wakeups.drain(
            batchSize: configuration.batchSize, pollInterval: configuration.pollInterval, logger: logger,
            failureMessage: "webhook delivery round failed; backing off"
        ) {
            let round = try await deliverRound()
            // Events that arrive while their stream waits for a retry would be read by every
            // claim until then; from time to time they are set to wait for it too.
            if clock.uptime() - lastHold >= configuration.holdInterval {
                lastHold = clock.uptime()
                _ = try await store.holdBlocked(partition: configuration.partition, now: clock.now())
            }
            return round
        }
    }

    /// Claims, sends and records one batch; returns how many deliveries it attempted.
    func deliverBatch() async throws -> Int {
        try await deliverRound().handled
    }

    /// ``deliverBatch()``, and whether its claim knew of more due now (``DeliveryStore/Claim/more``).
    func deliverRound() async throws -> DrainRound {
        let claimedAt = clock.now()
        let claim = try await store.claim(
            limit: configuration.batchSize, lease: configuration.effectiveLease, partition: configuration.partition, now: claimedAt)
        for hold in claim.held {
            // Only this endpoint waits; the rest of the claim goes out.
            ServiceMetrics.deliveriesHeldForSecret.increment(by: hold.deliveries)
            logger.error("a webhook endpoint's secret cannot be opened: its deliveries are held, the others go out", metadata: [
                "endpoint_id": "\(hold.endpointID.uuidString.lowercased())", "deliveries": "\(hold.deliveries)",
                "held_seconds": "\(Int(hold.until.timeIntervalSince(claimedAt).rounded()))", "error": "\(hold.error)",
                "fix": "put the key back in SUBSYNC_SECRET_KEYS and run subsync endpoints reseal, or rotate the endpoint's secret",
            ])
        }
        let claimed = claim.deliveries
        guard !claimed.isEmpty else { return DrainRound(handled: claim.held.reduce(0) { $0 + $1.deliveries }, more: claim.more) }
        // One sequence per (account, endpoint), in event order; the sequences run concurrently.
        // Each delivery goes with its signing keys, set up once per secret for the round.
        var groups: [[(delivery: DeliveryStore.Claimed, keys: [WebhookSigner.Key])]] = []
        var index: [Stream: Int] = [:]
        var keys: [String: WebhookSigner.Key] = [:]
        for delivery in claimed {
            let signing = delivery.secrets.map { secret in
                if let key = keys[secret.text] { return key }
                let key = WebhookSigner.Key(secret)
                keys[secret.text] = key
                return key
            }
            let stream = Stream(accountID: delivery.accountID, endpointID: delivery.endpointID)
            if let position = index[stream] {
                groups[position].append((delivery, signing))
            } else {
                index[stream] = groups.count
                groups.append([(delivery, signing)])
            }
        }
        // The lease must outlast the round: a stream starts no new attempt once an attempt could
        // end past `deadline`, leaving time to record. What it did not send is let go by `record`.
        let deadline = clock.uptime() + .seconds(max(0, configuration.effectiveLease - 2 * configuration.timeoutSeconds - 5))
        // The same limit for attempts still waiting in the HTTP loop's per-host queue (a
        // receiver that never answers takes its 16 slots for a whole timeout each): one not
        // sent by then is not sent at all, and its stream is given back below.
        let startBy = ContinuousClock.now + (deadline - clock.uptime())
        let (results, unsent) = await withTaskGroup(
            of: (attempted: [DeliveryStore.AttemptResult], unsent: [DeliveryStore.Claimed]).self
        ) { taskGroup in
            // Streams of one delivery go out as one batch (no order to keep among them); longer
            // streams each in a task of their own, one attempt after another.
            let singles = groups.filter { $0.count == 1 }.map { $0[0] }
            if !singles.isEmpty {
                taskGroup.addTask { await attemptAll(singles, startBy: startBy) }
            }
            for group in groups where group.count > 1 {
                taskGroup.addTask {
                    // A stream stops at its first failure: what follows waits for that retry
                    // (`record` holds it back), so the receiver never sees a later event first.
                    var results: [DeliveryStore.AttemptResult] = []
                    for (delivery, keys) in group {
                        if !results.isEmpty, clock.uptime() > deadline { break }
                        guard let result = await attempt(delivery, keys: keys, startBy: startBy) else {
                            // Not sent. After an attempt `record` lets the rest go; a stream
                            // with none is given back whole.
                            return (results, results.isEmpty ? group.map(\.delivery) : [])
                        }
                        results.append(result)
                        if result.outcome != .succeeded { break }
                    }
                    return (results, [])
                }
            }
            var all: [DeliveryStore.AttemptResult] = []
            var unsent: [DeliveryStore.Claimed] = []
            for await stream in taskGroup {
                all.append(contentsOf: stream.attempted)
                unsent.append(contentsOf: stream.unsent)
            }
            return (all, unsent)
        }
        try await record(results, lease: claimed[0].leasedUntil)
        if !unsent.isEmpty {
            try await store.release(unsent, now: clock.now())
        }
        return DrainRound(handled: claimed.count, more: claim.more)
    }

    /// Records a round's attempts in one transaction; when that fails for a reason other than
    /// the database being gone, delivery by delivery (each stream's in sequence order), so one
    /// row the database refuses fails only itself, and that one is recorded without the
    /// receiver's text. Nothing a receiver answers can keep other deliveries from being recorded
    /// (and so from being sent again after the lease).
    func record(_ results: [DeliveryStore.AttemptResult], lease: Date? = nil) async throws {
        let now = clock.now()
        do {
            // Every attempt new to the log, as it is unless a sender that outlived its lease
            // logged the same one (see `DeliveryStore.record`); then one by one, below, which
            // keeps what is logged.
            try await store.record(results, lease: lease, disableAfter: configuration.disableAfter, now: now, onlyNewAttempts: true)
            return
        } catch let error as PostgresError where error.isConnectionLoss || error.isRemoteNodeFailure || error.kind == .poolTimeout || error.kind == .closed {
            throw error
        } catch let error as PostgresError where error.sqlState == .uniqueViolation && error.table?.hasPrefix("delivery_attempts") == true {
            logger.info(
                "an attempt of this round was logged already, by a sender that outlived its lease; recording the round one by one",
                metadata: ["error": "\(error)"])
        } catch {
            logger.warning("recording a round of webhook attempts failed; recording them one by one", metadata: ["error": "\(error)"])
        }
        // `results` holds each stream's attempts in sequence order, as its sender made them.
        // Only a stream's last attempt of the round lets go of what follows it: what follows
        // the others is this round's, still leased, and recorded next.
        let lasts = Set(DeliveryStore.lastAttempts(of: results).map(\.deliveryID))
        for result in results {
            let last = lasts.contains(result.deliveryID)
            do {
                try await store.record(
                    [result], lease: lease, disableAfter: configuration.disableAfter, now: now, lettingGoOfStreams: last)
            } catch let error as PostgresError where error.isConnectionLoss || error.isRemoteNodeFailure || error.kind == .poolTimeout || error.kind == .closed {
                throw error
            } catch {
                logger.error("recording a webhook attempt failed; recording it without the response", metadata: [
                    "endpoint": "\(result.endpointID)", "account_id": "\(result.accountID)", "delivery_id": "\(result.deliveryID)",
                    "error": "\(error)",
                ])
                var bare = result
                bare.responseExcerpt = nil
                bare.error = "the attempt's response could not be recorded"
                try await store.record([bare], lease: lease, disableAfter: configuration.disableAfter, now: now, lettingGoOfStreams: last)
            }
        }
    }

    /// An account's deliveries to one endpoint: what is sent in order.
    struct Stream: Hashable {
        var accountID: String
        var endpointID: UUID
    }

    /// One attempt at one delivery, signed with `keys` (its secrets'); nil when it was not sent
    /// because it could not start by `startBy` (it is then no attempt: nothing is recorded or
    /// counted).
    func attempt(
        _ delivery: DeliveryStore.Claimed, keys: [WebhookSigner.Key], startBy: ContinuousClock.Instant
    ) async -> DeliveryStore.AttemptResult? {
        let now = clock.now()
        let request = request(for: delivery, keys: keys, startBy: startBy, now: now)
        let started = ContinuousClock.now
        let answer: Result<CurlResponse, any Error>
        do {
            answer = .success(try await client.execute(request))
        } catch {
            answer = .failure(error)
        }
        return result(of: CurlOutcome(result: answer, elapsed: ContinuousClock.now - started), for: delivery, attemptedAt: now)
    }

    /// The first (and only) attempts of streams of one delivery each, sent as one batch: the
    /// round is resumed once for all of them rather than a task per delivery (the common case:
    /// one event per account and endpoint in a round). Returns their results and the deliveries
    /// not sent (see ``attempt(_:keys:startBy:)``).
    func attemptAll(
        _ deliveries: [(delivery: DeliveryStore.Claimed, keys: [WebhookSigner.Key])], startBy: ContinuousClock.Instant
    ) async -> (attempted: [DeliveryStore.AttemptResult], unsent: [DeliveryStore.Claimed]) {
        let now = clock.now()
        let outcomes = await client.executeAll(
            deliveries.map { request(for: $0.delivery, keys: $0.keys, startBy: startBy, now: now) })
        var attempted: [DeliveryStore.AttemptResult] = []
        var unsent: [DeliveryStore.Claimed] = []
        attempted.reserveCapacity(deliveries.count)
        for (entry, outcome) in zip(deliveries, outcomes) {
            if let result = result(of: outcome, for: entry.delivery, attemptedAt: now) {
                attempted.append(result)
            } else {
                unsent.append(entry.delivery)
            }
        }
        return (attempted, unsent)
    }

    /// The signed request of an attempt at `delivery` made at `now`.
    private func request(
        for delivery: DeliveryStore.Claimed, keys: [WebhookSigner.Key], startBy: ContinuousClock.Instant, now: Date
    ) -> CurlRequest {
        let timestamp = Int(now.timeIntervalSince1970)
        let body = WebhookSigner.body(type: delivery.eventType, occurredAt: delivery.occurredAt, payload: delivery.payload)
        let eventID = delivery.eventID.lowercasedText
        return CurlRequest(
            url: delivery.url,
            method: "POST",
            headers: [
                ("content-type", "application/json"),
                ("webhook-id", eventID),
                ("webhook-timestamp", String(timestamp)),
                ("webhook-signature", WebhookSigner.signature(id: eventID, timestamp: timestamp, body: body, keys: keys)),
            ],
            body: body,
            connectTimeout: configuration.connectTimeout,
            totalTimeout: configuration.totalTimeout,
            maximumResponseBytes: 4096,
            startBy: startBy
        )
    }

    /// What an attempt made at `now` comes to: its outcome, the next attempt's time, what is
    /// recorded of the answer. Nil when it was not sent (`CurlError.notStarted`), or was
    /// cancelled because the loop is shutting down: neither counts as an attempt.
    private func result(
        of answer: CurlOutcome, for delivery: DeliveryStore.Claimed, attemptedAt now: Date
    ) -> DeliveryStore.AttemptResult? {
        let attemptNumber = delivery.attempts + 1
        var statusCode: Int?
        var failure: String?
        var excerpt: String?
        var retryAfter: TimeInterval?
        switch answer.result {
        case .success(let response):
            statusCode = response.status
            excerpt = String(decoding: response.body.prefix(4096), as: UTF8.self)
            if response.status == 429 || response.status == 503 {
                retryAfter = RetrySchedule.retryAfter(response.header("retry-after"), now: now)
            }
        case .failure(CurlError.notStarted), .failure(is CancellationError):
            // Not sent (or given up when the loop stopped): no attempt. The delivery's stream is
            // given back (`release`, or `record` for what follows an attempt) and sent again.
            return nil
        case .failure(let error):
            self.logger.debug("webhook transfer failed", metadata: ["endpoint": "\(delivery.endpointID)", "error": "\(error)"])
            // CurlError descriptions name the address and the failure, never the secret.
            failure = String(describing: error)
        }
        let elapsed = answer.elapsed
        let latency = Int(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)

        let outcome: DeliveryStore.AttemptResult.Outcome
        var nextAttemptAt = now
        if let statusCode, (200..<300).contains(statusCode) {
            outcome = .succeeded
            WebhookMetrics.succeeded.increment()
        } else if statusCode == 410 {
            outcome = .gone
            WebhookMetrics.failed.increment()
        } else {
            WebhookMetrics.failed.increment()
            var generator = SystemRandomNumberGenerator()
            // The schedule counts from an operator's last retry (at least this one attempt).
            let scheduled = max(1, attemptNumber - delivery.attemptsBeforeRetry)
            if let delay = configuration.schedule.delay(afterAttempt: scheduled, using: &generator) {
                outcome = .retry
                nextAttemptAt = now.addingTimeInterval(max(delay, retryAfter ?? 0))
            } else {
                outcome = .dead
                WebhookMetrics.dead.increment()
            }
            if failure == nil, let statusCode { failure = "HTTP \(statusCode)" }
        }
        WebhookMetrics.latency.recordMilliseconds(latency)
        return DeliveryStore.AttemptResult(
            accountID: delivery.accountID,
            deliveryID: delivery.deliveryID,
            endpointID: delivery.endpointID,
            eventSequence: delivery.eventSequence,
            attempt: attemptNumber,
            outcome: outcome,
            nextAttemptAt: nextAttemptAt,
            statusCode: statusCode,
            latencyMilliseconds: latency,
            error: failure.map { String($0.prefix(1000)) },
            responseExcerpt: excerpt,
            attemptedAt: now,
            endsStream: delivery.endsStream
        )
    }
}

/// Delivery metrics.
enum WebhookMetrics {
    static let succeeded = Counter(label: "subsync_webhook_deliveries_succeeded_total")
    static let failed = Counter(label: "subsync_webhook_attempts_failed_total")
    static let dead = Counter(label: "subsync_webhook_deliveries_dead_total")
    static let latency = Metrics.Timer(label: "subsync_webhook_attempt_duration_seconds", preferredDisplayUnit: .seconds)
}
