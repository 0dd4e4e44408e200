import CCurl
import Logging

/// A libcurl multi handle driven by one dedicated thread (never Swift's cooperative pool):
/// many transfers in flight, connections reused (keep-alive), each transfer with its own timeouts.
///
/// `execute` validates the request, hands it to the loop thread through a locked queue and wakes
/// the thread (`curl_multi_wakeup`); the thread runs `curl_multi_poll` / `curl_multi_perform` /
/// `curl_multi_info_read` and resumes each caller's continuation when its transfer ends.
/// Every connection is checked by the `AddressGuard` at connect time.
public final class CurlClient: Sendable {
    public struct Configuration: Sendable {
        /// Which addresses transfers may connect to. Default: public addresses only.
        public var addressGuard: AddressGuard
        /// Transfers in flight at once; further requests wait in a queue (their timeouts start when they leave it).
        public var maximumConcurrentTransfers: Int
        /// Transfers per host at once (so at most this many HTTP/1.1 connections; an HTTP/2
        /// connection may carry several), 0 for no limit; further transfers to that host wait in
        /// the loop's queue, their timeouts starting when they leave it (see
        /// `CurlRequest.startBy`), while other hosts go on (`CurlWaitingTransfers`).
        public var maximumConnectionsPerHost: Int
        /// The `User-Agent` header, unless a request sets its own.
        public var userAgent: String
        /// Where the loop thread logs.
        public var logger: Logger

        public init(
            addressGuard: AddressGuard = .publicOnly,
            maximumConcurrentTransfers: Int = 256,
            maximumConnectionsPerHost: Int = 16,
            userAgent: String = "subsync-webhooks/1",
            logger: Logger = Logger(label: "subsync.curl")
        ) {
            self.addressGuard = addressGuard
            self.maximumConcurrentTransfers = maximumConcurrentTransfers
            self.maximumConnectionsPerHost = maximumConnectionsPerHost
            self.userAgent = userAgent
            self.logger = logger
        }
    }

    public let configuration: Configuration
    private let queue: CurlSubmissionQueue

    public init(configuration: Configuration = .init()) {
        CurlLibrary.ensureInitialized()
        var configuration = configuration
        configuration.maximumConcurrentTransfers = max(1, configuration.maximumConcurrentTransfers)
        configuration.maximumConnectionsPerHost = max(0, configuration.maximumConnectionsPerHost)
        self.configuration = configuration
        self.queue = CurlLoop.start(configuration: configuration)
    }

    deinit {
        queue.shutDown()
    }

    /// Sends the request. Returns on any HTTP answer (any status; 3xx is returned, not followed);
    /// throws `CurlError` when there is no answer, `CancellationError` when the calling task is
    /// cancelled (the transfer is then removed at once).
    public func execute(_ request: CurlRequest) async throws -> CurlResponse {
        try Self.validate(request)
        let transfer = CurlTransfer(
            request: request, addressGuard: configuration.addressGuard, userAgent: configuration.userAgent)
        let queue = self.queue
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                guard transfer.attach(.single(continuation)) else { return }
                if !queue.submit(transfer) {
                    transfer.finish(.failure(CurlError.shutDown))
                }
            }
        } onCancel: {
            if transfer.markCancelled() {
                queue.cancel(transfer)
            }
        }
    }

    /// Sends every request at once, in one hand-over to the loop thread, and returns when each
    /// has an answer or has failed: the outcomes in the order of `requests`, each as `execute`
    /// would have returned or thrown it, with its time from submission. Requests to one host
    /// still go at most `maximumConnectionsPerHost` at a time, the rest waiting in the loop's
    /// queue. Cancelling the calling task removes every transfer not yet finished (they fail
    /// with `CancellationError`).
    ///
    /// Cheaper than a task calling `execute` per request: the caller is resumed once for the
    /// batch, not once per answer.
    public func executeAll(_ requests: [CurlRequest]) async -> [CurlOutcome] {
        guard !requests.isEmpty else { return [] }
        let batch = CurlBatch(count: requests.count, started: .now)
        var valid: [(transfer: CurlTransfer, slot: Int)] = []
        valid.reserveCapacity(requests.count)
        // A batch's requests mostly share a few URLs (a round's deliveries to one endpoint):
        // each is parsed once, and its host key (the per-host queue's) worked out once, rather
        // than once per request (docs/PERFORMANCE.md, *In the code*).
        var hostKeys: [String: String] = [:]
        for (index, request) in requests.enumerated() {
            let hostKey: String
            do {
                if let known = hostKeys[request.url] {
                    try Self.validateMethodAndHeaders(request)
                    hostKey = known
                } else {
                    try Self.validate(request)
                    hostKey = CurlTransfer.hostKey(of: request.url)
                    hostKeys[request.url] = hostKey
                }
            } catch {
                batch.complete(index, with: .failure(error))
                continue
            }
            valid.append(
                (CurlTransfer(
                    request: request, addressGuard: configuration.addressGuard, userAgent: configuration.userAgent,
                    hostKey: hostKey), index))
        }
        let accepted = valid
        let queue = self.queue
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                batch.attach(continuation)
                var submitted: [CurlTransfer] = []
                submitted.reserveCapacity(accepted.count)
                for (transfer, slot) in accepted where transfer.attach(.batch(batch, index: slot)) {
                    submitted.append(transfer)
                }
                if !queue.submit(contentsOf: submitted) {
                    for transfer in submitted {
                        transfer.finish(.failure(CurlError.shutDown))
                    }
                }
            }
        } onCancel: {
            queue.cancel(contentsOf: accepted.map(\.transfer).filter { $0.markCancelled() })
        }
    }

    /// Stops the loop thread; in-flight and queued requests fail with `.shutDown`, and so do later
    /// ones. Idempotent; returns without waiting for the thread to finish its clean-up.
    public func shutdown() {
        queue.shutDown()
    }

    // MARK: - Validation

    private static func validate(_ request: CurlRequest) throws(CurlError) {
        try validateURL(request.url)
        try validateMethodAndHeaders(request)
    }

    /// ``validate(_:)`` but for the URL.
    private static func validateMethodAndHeaders(_ request: CurlRequest) throws(CurlError) {
        let method = request.method.utf8
        guard !method.isEmpty, method.count <= 32, method.allSatisfy(isTokenByte) else {
            throw CurlError.other(
                code: Int(CURLE_BAD_FUNCTION_ARGUMENT.rawValue), message: "invalid HTTP method \"\(request.method)\"")
        }
        for header in request.headers {
            let name = header.name.utf8
            guard !name.isEmpty, name.allSatisfy(isTokenByte) else {
                throw CurlError.other(
                    code: Int(CURLE_BAD_FUNCTION_ARGUMENT.rawValue), message: "invalid header name \"\(header.name)\"")
            }
            guard !header.value.utf8.contains(where: { $0 == 0 || $0 == 10 || $0 == 13 }) else {
                throw CurlError.other(
                    code: Int(CURLE_BAD_FUNCTION_ARGUMENT.rawValue),
                    message: "the value of header \"\(header.name)\" contains CR, LF or NUL")
            }
        }
    }

    /// Parses with libcurl's own URL parser, so the check agrees with what the transfer will use.
    /// Messages never repeat the URL, which may carry credentials or tokens.
    private static func validateURL(_ url: String) throws(CurlError) {
        guard !url.isEmpty, !url.utf8.contains(0) else {
            throw CurlError.invalidURL("the URL is empty or contains NUL")
        }
        guard let handle = curl_url() else {
            throw CurlError.other(code: Int(CURLE_OUT_OF_MEMORY.rawValue), message: "curl_url failed")
        }
        defer { curl_url_cleanup(handle) }
        let parsed = url.withCString { curl_url_set(handle, CURLUPART_URL, $0, 0) }
        guard parsed == CURLUE_OK else {
            throw CurlError.invalidURL("the URL does not parse (\(String(cString: curl_url_strerror(parsed))))")
        }
        var schemePointer: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, CURLUPART_SCHEME, &schemePointer, 0) == CURLUE_OK, let schemePointer else {
            throw CurlError.invalidURL("the URL has no scheme")
        }
        let scheme = String(cString: schemePointer).lowercased()
        curl_free(schemePointer)
        guard scheme == "http" || scheme == "https" else {
            throw CurlError.invalidURL("scheme \"\(scheme)\" is not http or https")
        }
        var hostPointer: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, CURLUPART_HOST, &hostPointer, 0) == CURLUE_OK, let hostPointer else {
            throw CurlError.invalidURL("the URL has no host")
        }
        curl_free(hostPointer)
    }

    /// RFC 9110 `tchar`.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
