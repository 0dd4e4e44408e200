import Curl
import Foundation
import Logging
import SyncCore
import SyncStore

/// A client of the App Store Server API over the project's libcurl client (docs/STORE.md).
///
/// Every request carries a fresh-enough ES256 bearer token (``AppStoreAPITokenSigner``), takes a
/// slot of the process-wide ``AppStoreRateLimiter`` first, and is retried as Apple specifies:
/// `429` waits for its `Retry-After` (a UNIX time in milliseconds), the retryable error codes and
/// `5xx` and a failed connection back off exponentially, a timeout pauses the endpoint for
/// ``timeoutPause`` and is returned at once, everything else is returned at once.
/// `4040010` (transaction not found) is an answer: `nil`. Signed fields are returned as text;
/// callers verify them (``AppStoreAPI``).
public final class AppStoreServerAPI: Sendable {
    public let configuration: AppStoreAPIConfiguration
    private let curl: CurlClient
    private let signer: AppStoreAPITokenSigner
    private let limiter: AppStoreRateLimiter
    private let clock: any ServiceClock
    private let logger: Logger

    /// The largest answer read (a page of 20 notifications, each carrying signed transactions).
    static let maximumAnswerBytes = 8 << 20
    /// The first backoff; doubled per attempt.
    static let firstBackoff: Duration = .milliseconds(500)
    /// How long an endpoint rests after a request to it timed out.
    public static let timeoutPause: Duration = .seconds(10)

    /// - Parameters:
    ///   - curl: the libcurl client to send with; by default one of its own that connects to
    ///     public addresses only, or anywhere when ``AppStoreAPIConfiguration/baseURL`` was
    ///     overridden (an operator's explicit choice: a test double, a proxy).
    ///   - sharedBudget: the database's rate buckets, through which every process of the app
    ///     shares Apple's per-app limits; `nil` keeps them in this process only.
    public init(
        configuration: AppStoreAPIConfiguration, curl: CurlClient? = nil, clock: any ServiceClock = SystemClock(),
        sharedBudget: RateBuckets? = nil, logger: Logger = Logger(label: "subsync.appstore")
    ) {
        self.configuration = configuration
        let overridden = configuration.baseURL != configuration.environment.baseURL
        // Public addresses only; an overridden base URL may also be loopback (a test double, a
        // local proxy), never a private or link-local address (169.254.169.254 and the like).
        self.curl = curl ?? CurlClient(configuration: .init(
            addressGuard: overridden ? ((try? AddressGuard(allow: ["127.0.0.0/8", "::1/128"])) ?? .publicOnly) : .publicOnly,
            maximumConcurrentTransfers: 64, maximumConnectionsPerHost: 8, userAgent: "subsync-appstore/1", logger: logger))
        self.signer = AppStoreAPITokenSigner(configuration: configuration, clock: clock)
        self.limiter = AppStoreRateLimiter(
            rate: { [configuration] in configuration.requestsPerSecond(for: $0) }, clock: clock,
            shared: sharedBudget.map { ($0, "appstore:\(configuration.environment.rawValue):\(configuration.bundleID):") })
        self.clock = clock
        self.logger = logger
    }

    // MARK: - Endpoints

    /// Get All Subscription Statuses for the subscription group(s) of `transactionID` (any
    /// transaction id of the subscription); `nil` when the store has no such transaction.
    public func subscriptionStatuses(transactionID: String) async throws(AppStoreAPIError) -> AppStoreAPI.StatusResponse? {
        try await call(
            endpoint: "subscriptions", method: "GET", path: "/inApps/v1/subscriptions/\(try Self.pathComponent(transactionID))",
            as: AppStoreAPI.StatusResponse.self)
    }

    /// One page of Get Transaction History v2, oldest first, from `revision` (the first page
    /// without); `nil` when the store has no such transaction.
    public func transactionHistory(transactionID: String, revision: String? = nil) async throws(AppStoreAPIError) -> AppStoreAPI.TransactionPage? {
        var query = [("sort", "ASCENDING")]
        if let revision { query.append(("revision", revision)) }
        return try await call(
            endpoint: "history", method: "GET", path: "/inApps/v2/history/\(try Self.pathComponent(transactionID))", query: query,
            as: AppStoreAPI.TransactionPage.self)
    }

    /// Every signed transaction of Get Transaction History v2, paged by `revision` while `hasMore`
    /// (at most `maximumPages` pages and ``maximumPagedTransactions`` transactions: bounds
    /// against an answer that never ends).
    public func allTransactions(transactionID: String, maximumPages: Int = 1_000) async throws(AppStoreAPIError) -> [String]? {
        try await allPages(maximumPages: maximumPages) { revision throws(AppStoreAPIError) in
            try await self.transactionHistory(transactionID: transactionID, revision: revision)
        }
    }

    /// One page of Get Refund History v2; `nil` when the store has no such transaction.
    public func refundHistory(transactionID: String, revision: String? = nil) async throws(AppStoreAPIError) -> AppStoreAPI.TransactionPage? {
        try await call(
            endpoint: "refunds", method: "GET", path: "/inApps/v2/refund/lookup/\(try Self.pathComponent(transactionID))",
            query: revision.map { [("revision", $0)] } ?? [], as: AppStoreAPI.TransactionPage.self)
    }

    /// Every signed transaction of Get Refund History, paged by `revision` while `hasMore`.
    public func allRefunds(transactionID: String, maximumPages: Int = 1_000) async throws(AppStoreAPIError) -> [String]? {
        try await allPages(maximumPages: maximumPages) { revision throws(AppStoreAPIError) in
            try await self.refundHistory(transactionID: transactionID, revision: revision)
        }
    }

    /// One page of Get Notification History: the notifications Apple sent (or tried to) in
    /// `[start, end)`, from `paginationToken` (the first page without). Apple keeps 180 days.
    public func notificationHistory(
        from start: Date, to end: Date, paginationToken: String? = nil
    ) async throws(AppStoreAPIError) -> AppStoreAPI.NotificationHistoryPage {
        let body = Data(#"{"startDate":\#(Self.milliseconds(start)),"endDate":\#(Self.milliseconds(end))}"#.utf8)
        var query: [(String, String)] = []
        if let paginationToken { query.append(("paginationToken", try Self.pagingToken(paginationToken))) }
        let page = try await call(
            endpoint: "notification-history", method: "POST", path: "/inApps/v1/notifications/history", query: query, body: body,
            as: AppStoreAPI.NotificationHistoryPage.self)
        guard let page else { throw .malformedAnswer("notification history answered transaction not found") }
        return page
    }

    /// Request a Test Notification: Apple sends one to the app's notification URL.
    public func requestTestNotification() async throws(AppStoreAPIError) -> AppStoreAPI.TestNotificationRequested {
        let answer = try await call(
            endpoint: "test-notification", method: "POST", path: "/inApps/v1/notifications/test", body: Data(),
            as: AppStoreAPI.TestNotificationRequested.self)
        guard let answer else { throw .malformedAnswer("test notification answered transaction not found") }
        return answer
    }

    /// Get Test Notification Status of a token ``requestTestNotification()`` returned.
    public func testNotificationStatus(token: String) async throws(AppStoreAPIError) -> AppStoreAPI.TestNotificationStatus? {
        try await call(
            endpoint: "test-notification", method: "GET", path: "/inApps/v1/notifications/test/\(try Self.pathComponent(token))",
            as: AppStoreAPI.TestNotificationStatus.self)
    }

    /// Whether calls to `endpoint` are paused now (a 429 with a far `Retry-After`, or a queue
    /// longer than the longest wait): a caller with many questions stops asking for now.
    public func isPaused(_ endpoint: String) async -> Bool {
        await limiter.delay(endpoint) > configuration.maximumRetryWait
    }

    // MARK: - Requests

    /// The most signed transactions one paged read collects (a subscription renewing monthly for
    /// 80 years has under a thousand), and their bytes.
    static let maximumPagedTransactions = 20_000
    static let maximumPagedBytes = 64 << 20

    /// Pages through an endpoint paged by `revision`. A revision seen before, a page count, a
    /// transaction count or a size past its bound is a malformed answer; so is "not found" after
    /// the first page (the list would be silently short).
    private func allPages(
        maximumPages: Int, _ page: (String?) async throws(AppStoreAPIError) -> AppStoreAPI.TransactionPage?
    ) async throws(AppStoreAPIError) -> [String]? {
        var signed: [String] = []
        var bytes = 0
        var revision: String?
        var seen: Set<String> = []
        for _ in 0..<maximumPages {
            guard let answer = try await page(revision) else {
                if revision == nil { return nil }
                throw .malformedAnswer("transaction not found after the first page")
            }
            signed += answer.signedTransactions
            bytes += answer.signedTransactions.reduce(0) { $0 + $1.utf8.count }
            guard signed.count <= Self.maximumPagedTransactions, bytes <= Self.maximumPagedBytes else {
                throw .malformedAnswer("more than \(Self.maximumPagedTransactions) transactions or \(Self.maximumPagedBytes) bytes")
            }
            guard answer.hasMore else { return signed }
            guard let next = answer.revision, seen.insert(next).inserted else { throw .malformedAnswer("hasMore without a new revision") }
            revision = try Self.pagingToken(next)
        }
        throw .malformedAnswer("more than \(maximumPages) pages")
    }

    /// A revision or pagination token from an answer, before it goes into the next URL: short,
    /// printable ASCII (it is percent-encoded there).
    static func pagingToken(_ text: String) throws(AppStoreAPIError) -> String {
        guard !text.isEmpty, text.utf8.count <= 512, text.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw .malformedAnswer("a revision or pagination token that is not one (\(text.utf8.count) bytes)")
        }
        return text
    }

    /// Sends one request with the retry policy above and decodes a 2xx answer.
    func call<Answer: Decodable>(
        endpoint: String, method: String, path: String, query: [(String, String)] = [], body: Data? = nil, as _: Answer.Type
    ) async throws(AppStoreAPIError) -> Answer? {
        let url = configuration.baseURL + path + Self.queryString(query)
        var lastError = AppStoreAPIError.transport("not sent")
        for attempt in 1...configuration.maximumAttempts {
            let response: CurlResponse
            do {
                guard try await limiter.acquire(endpoint, maximumWait: configuration.maximumRetryWait) else {
                    let wait = await limiter.delay(endpoint)
                    throw AppStoreAPIError.rateLimited(until: clock.now().addingTimeInterval(Double(wait.components.seconds) + 1))
                }
                let token: String
                do {
                    token = try await signer.token()
                } catch {
                    throw AppStoreAPIError.signingFailed("\(error)")
                }
                var headers = [("Authorization", "Bearer \(token)"), ("Accept", "application/json")]
                if body != nil { headers.append(("Content-Type", "application/json")) }
                response = try await curl.execute(CurlRequest(
                    url: url, method: method, headers: headers, body: body.map { [UInt8]($0) } ?? [],
                    connectTimeout: .seconds(10), totalTimeout: configuration.requestTimeout, maximumResponseBytes: Self.maximumAnswerBytes))
            } catch let error as CurlError {
                if case .timedOut = error {
                    // A store too slow to answer is not asked again at once (each attempt would
                    // hold its caller for a whole timeout): the endpoint pauses, as after a 429,
                    // and the caller goes on with other work.
                    await limiter.pause(endpoint, for: Self.timeoutPause)
                    throw .timedOut("\(error)")
                }
                lastError = .transport("\(error)")
                guard try await backOff(after: attempt, error: lastError, endpoint: endpoint) else { throw lastError }
                continue
            } catch let error as AppStoreAPIError {
                throw error
            } catch {
                // The limiter's sleep, cancelled, or the shared schedule unreadable.
                throw .transport(error is CancellationError ? "cancelled" : "rate limit schedule: \(error)")
            }
            if (200..<300).contains(response.status) {
                guard !response.truncated else { throw .malformedAnswer("answer larger than \(Self.maximumAnswerBytes) bytes") }
                do {
                    return try JSONDecoder().decode(Answer.self, from: Data(response.body))
                } catch {
                    throw .malformedAnswer("\(Answer.self): \(error)")
                }
            }
            let apple = try? JSONDecoder().decode(AppStoreAPI.ErrorBody.self, from: Data(response.body))
            if response.status == 404, apple?.errorCode == AppStoreAPIError.transactionNotFound { return nil }
            let error = AppStoreAPIError.api(status: response.status, code: apple?.errorCode, message: apple?.errorMessage.map(Self.printable))
            if response.status == 429, let until = Self.retryAfter(response, now: clock.now()) {
                let wait = until.timeIntervalSince(clock.now())
                // Nobody in this process asks this endpoint again before Apple said.
                await limiter.pause(endpoint, for: .milliseconds(Int64(max(0, wait) * 1000)))
                guard attempt < configuration.maximumAttempts, wait <= Double(configuration.maximumRetryWait.components.seconds) else {
                    throw .rateLimited(until: until)
                }
                logger.notice("App Store Server API rate limit; waiting", metadata: ["endpoint": "\(endpoint)", "seconds": "\(max(0, wait))"])
                do { try await clock.sleep(for: .milliseconds(Int64(max(0, wait) * 1000))) } catch { throw .transport("cancelled") }
                lastError = error
                continue
            }
            guard error.isRetryable else { throw error }
            lastError = error
            guard try await backOff(after: attempt, error: error, endpoint: endpoint) else { throw error }
        }
        throw lastError
    }

    /// Waits before the next attempt; `false` when there is none (attempts used up, or the wait
    /// would pass ``AppStoreAPIConfiguration/maximumRetryWait``).
    private func backOff(after attempt: Int, error: AppStoreAPIError, endpoint: String) async throws(AppStoreAPIError) -> Bool {
        guard attempt < configuration.maximumAttempts else { return false }
        let wait = Self.firstBackoff * (1 << min(attempt - 1, 10))
        guard wait <= configuration.maximumRetryWait else { return false }
        logger.notice("App Store Server API call failed; retrying", metadata: [
            "endpoint": "\(endpoint)", "attempt": "\(attempt)", "error": "\(error)",
        ])
        do { try await clock.sleep(for: wait) } catch { throw .transport("cancelled") }
        return true
    }

    /// `Retry-After` as Apple sends it, a UNIX time in milliseconds; a small number is read as
    /// HTTP's delay in seconds (a proxy's). At most a day from `now`: a hostile value cannot park
    /// the caller for ever (or make a date no formatter can print).
    static func retryAfter(_ response: CurlResponse, now: Date) -> Date? {
        guard let text = response.headers.first(where: { $0.name.lowercased() == "retry-after" })?.value,
            let value = Double(text.trimmingCharacters(in: .whitespaces)), value.isFinite, value > 0
        else { return nil }
        let until = value < 1e9 ? now.addingTimeInterval(value) : Date(timeIntervalSince1970: value / 1000)
        return min(until, now.addingTimeInterval(86_400))
    }

    /// Apple's `errorMessage` as it may be logged: at most 200 Unicode scalars, control
    /// characters replaced.
    static func printable(_ text: String) -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars.prefix(200) {
            scalars.append(scalar.properties.generalCategory == .control ? "?" : scalar)
        }
        return String(scalars)
    }

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }

    /// A path component: transaction ids and tokens are digits, letters, `-`, `_` and `.`;
    /// anything else is refused before a request is made.
    static func pathComponent(_ text: String) throws(AppStoreAPIError) -> String {
        guard !text.isEmpty, text.count <= 128,
            text.unicodeScalars.allSatisfy({ $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "-_.".unicodeScalars.contains($0)) }),
            text != ".", text != ".."
        else { throw .invalidArgument("not a transaction id or token: \(text.prefix(40).debugDescription)") }
        return text
    }

    static func queryString(_ query: [(String, String)]) -> String {
        guard !query.isEmpty else { return "" }
        var allowed = CharacterSet.urlQueryAllowed
        allowed.remove(charactersIn: "&=+?#")
        return "?" + query.map { name, value in
            "\(name)=\(value.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")"
        }.joined(separator: "&")
    }
}
