import CCurl

/// One request from `execute` (or one of an `executeAll` batch) to its answer: who is told it,
/// the easy handle and what the libcurl callbacks collect.
///
/// `@unchecked Sendable`: the object crosses from the calling task to the loop thread once (through
/// the client's locked submission queue). Its lifecycle state and completion sit behind `state`,
/// a lock, because `execute`'s cancellation handler touches them from any thread. Every other
/// stored property (`easy`, the header list, the error buffer, the response being collected) is
/// touched only by the loop thread — in `start`, in the libcurl callbacks, which libcurl runs
/// inside `curl_multi_perform` on that thread, in `complete` and in `cleanup`.
final class CurlTransfer: @unchecked Sendable {
    private enum Phase {
        /// Made by `execute`, not yet handed to the loop.
        case created
        /// In the loop's queue or in flight.
        case submitted
        /// The caller's task was cancelled; its caller is told (or will be by `attach`).
        case cancelled
        /// The caller has been told the outcome.
        case finished
    }

    /// Who is told the outcome: the task of one `execute`, or one slot of an `executeAll` batch.
    enum Completion {
        case single(CheckedContinuation<CurlResponse, any Error>)
        case batch(CurlBatch, index: Int)

        func deliver(_ result: Result<CurlResponse, any Error>) {
            switch self {
            case .single(let continuation): continuation.resume(with: result)
            case .batch(let batch, let index): batch.complete(index, with: result)
            }
        }
    }

    private struct State {
        var phase: Phase = .created
        var completion: Completion?
    }

    /// Collected response headers stop growing past this many bytes (libcurl caps a single line at 100 KiB).
    static let maximumHeaderBytes = 256 * 1024

    let request: CurlRequest
    /// Scheme, host and port of the request's URL (see `CurlWaitingTransfers`).
    let hostKey: String
    private let addressGuard: AddressGuard
    private let userAgent: String
    private let state = CurlLock(State())

    // MARK: Loop-thread state

    /// The easy handle, from `start` until `cleanup`.
    private(set) var easy: UnsafeMutableRawPointer?
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var errorBuffer: UnsafeMutablePointer<CChar>?
    /// The +1 reference the callbacks' context pointer stands for (see `start`).
    private var callbackReference: Unmanaged<CurlTransfer>?

    private(set) var responseBody: [UInt8] = []
    private(set) var truncated = false
    private var responseHeaderBlock = CurlHeaderBlock(limit: CurlTransfer.maximumHeaderBytes)
    /// The final response's headers so far, parsed (the loop hands the block on unparsed).
    var responseHeaders: [(name: String, value: String)] { responseHeaderBlock.fields }
    /// The last address the guard refused, and how many sockets it let libcurl open.
    private var refusedAddress: String?
    private var permittedSockets = 0

    /// `hostKey`: `hostKey(of: request.url)`, when the caller has it already.
    init(request: CurlRequest, addressGuard: AddressGuard, userAgent: String, hostKey: String? = nil) {
        self.request = request
        self.hostKey = hostKey ?? Self.hostKey(of: request.url)
        self.addressGuard = addressGuard
        self.userAgent = userAgent
    }

    deinit {
        // `cleanup` runs on every path that called `start`; this only guards against a future bug.
        assert(easy == nil, "a CurlTransfer was released with its easy handle still open")
    }

    // MARK: - Lifecycle (any thread)

    /// Stores who is told the outcome. Returns false when the task was already cancelled, in
    /// which case `completion` has been told `CancellationError`.
    func attach(_ completion: Completion) -> Bool {
        let alreadyCancelled = state.withLock { state -> Bool in
            guard state.phase == .created else { return true }
            state.phase = .submitted
            state.completion = completion
            return false
        }
        if alreadyCancelled {
            completion.deliver(.failure(CancellationError()))
            return false
        }
        return true
    }

    /// Marks the transfer cancelled. Returns true when it had been handed to the loop, which must
    /// then be told (it removes the easy handle and tells the caller).
    func markCancelled() -> Bool {
        state.withLock { state in
            switch state.phase {
            case .created:
                state.phase = .cancelled
                return false
            case .submitted:
                state.phase = .cancelled
                return true
            case .cancelled, .finished:
                return false
            }
        }
    }

    /// Whether the transfer still wants to run (not cancelled, not finished).
    var isWanted: Bool {
        state.withLock { $0.phase == .submitted }
    }

    /// Tells the caller `result`. Only the first call has an effect.
    func finish(_ result: Result<CurlResponse, any Error>) {
        let completion = state.withLock { state in
            state.phase = .finished
            let completion = state.completion
            state.completion = nil
            return completion
        }
        completion?.deliver(result)
    }

    // MARK: - The easy handle (loop thread)

    /// Configures `spare` (a handle a finished transfer gave back, reset to libcurl's defaults by
    /// ``cleanup(keepingHandle:)``), or a new easy handle. On failure the handle is freed and
    /// nothing stays allocated.
    func start(reusing spare: UnsafeMutableRawPointer? = nil) throws(CurlError) -> UnsafeMutableRawPointer {
        guard let easy = spare ?? curl_easy_init() else {
            throw CurlError.other(code: Int(CURLE_OUT_OF_MEMORY.rawValue), message: "curl_easy_init failed")
        }
        self.easy = easy
        // The callbacks receive this object as an unretained pointer. Retain it once here so the
        // pointer stays valid for as long as libcurl may call back, whoever else holds the object;
        // `cleanup` releases it right after `curl_easy_cleanup`, when no callback can run any more.
        let reference = Unmanaged.passRetained(self)
        callbackReference = reference
        do {
            try configure(easy, context: reference.toOpaque())
        } catch {
            cleanup()
            throw error
        }
        return easy
    }

    private func configure(_ easy: UnsafeMutableRawPointer, context: UnsafeMutableRawPointer) throws(CurlError) {
        func check(_ code: CURLcode, _ what: String) throws(CurlError) {
            guard code == CURLE_OK else {
                throw CurlError.other(
                    code: Int(code.rawValue),
                    message: "setting \(what) failed: \(String(cString: curl_easy_strerror(code)))")
            }
        }
        func set(_ option: CURLoption, _ value: Int, _ what: String) throws(CurlError) {
            try check(subsync_curl_easy_setopt_long(easy, option, value), what)
        }
        func set(_ option: CURLoption, _ value: String, _ what: String) throws(CurlError) {
            // libcurl copies string options (all but CURLOPT_POSTFIELDS, which is not used).
            try check(value.withCString { subsync_curl_easy_setopt_string(easy, option, $0) }, what)
        }

        let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
        buffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        errorBuffer = buffer
        try check(subsync_curl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, buffer), "CURLOPT_ERRORBUFFER")

        try set(CURLOPT_NOSIGNAL, 1, "CURLOPT_NOSIGNAL")
        try set(CURLOPT_URL, request.url, "CURLOPT_URL")
        try set(CURLOPT_PROTOCOLS_STR, "http,https", "CURLOPT_PROTOCOLS_STR")
        try set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https", "CURLOPT_REDIR_PROTOCOLS_STR")
        try set(CURLOPT_FOLLOWLOCATION, 0, "CURLOPT_FOLLOWLOCATION")
        // An empty proxy disables proxies, including http_proxy/https_proxy from the environment:
        // the address guard must judge the webhook endpoint itself.
        try set(CURLOPT_PROXY, "", "CURLOPT_PROXY")
        try set(CURLOPT_CONNECTTIMEOUT_MS, request.connectTimeout.curlMilliseconds, "CURLOPT_CONNECTTIMEOUT_MS")
        try set(CURLOPT_TIMEOUT_MS, request.totalTimeout.curlMilliseconds, "CURLOPT_TIMEOUT_MS")
        try set(CURLOPT_TCP_KEEPALIVE, 1, "CURLOPT_TCP_KEEPALIVE")
        try set(CURLOPT_USERAGENT, userAgent, "CURLOPT_USERAGENT")

        try check(subsync_curl_easy_setopt_write_callback(easy, { data, size, count, context in
            let length = size &* count
            guard let context else { return length }
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
            transfer.receiveBody(UnsafeRawBufferPointer(start: data, count: length))
            return length
        }), "CURLOPT_WRITEFUNCTION")
        try check(subsync_curl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, context), "CURLOPT_WRITEDATA")

        try check(subsync_curl_easy_setopt_header_callback(easy, { data, size, count, context in
            let length = size &* count
            guard let context else { return length }
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
            transfer.receiveHeaderLine(UnsafeRawBufferPointer(start: data, count: length))
            return length
        }), "CURLOPT_HEADERFUNCTION")
        try check(subsync_curl_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, context), "CURLOPT_HEADERDATA")

        try check(subsync_curl_easy_setopt_opensocket_callback(easy, { context, _, address in
            guard let context, let address else { return subsync_curl_socket_bad() }
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
            return transfer.openSocket(address)
        }), "CURLOPT_OPENSOCKETFUNCTION")
        try check(subsync_curl_easy_setopt_pointer(easy, CURLOPT_OPENSOCKETDATA, context), "CURLOPT_OPENSOCKETDATA")

        // Method and body.
        let method = request.method
        let sendsBody = !request.body.isEmpty || (method != "GET" && method != "HEAD")
        if sendsBody {
            // CURLOPT_COPYPOSTFIELDS copies the bytes into the handle, so the body needs no lifetime
            // management; the size must be set first so that binary bodies (with NULs) are copied whole.
            try check(
                subsync_curl_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(request.body.count)),
                "CURLOPT_POSTFIELDSIZE_LARGE")
            let code = request.body.withUnsafeBytes { bytes -> CURLcode in
                if let base = bytes.baseAddress, !bytes.isEmpty {
                    return subsync_curl_easy_setopt_string(
                        easy, CURLOPT_COPYPOSTFIELDS, base.assumingMemoryBound(to: CChar.self))
                }
                return subsync_curl_easy_setopt_string(easy, CURLOPT_COPYPOSTFIELDS, "")
            }
            try check(code, "CURLOPT_COPYPOSTFIELDS")
            if method != "POST" {
                try set(CURLOPT_CUSTOMREQUEST, method, "CURLOPT_CUSTOMREQUEST")
            }
        } else if method == "HEAD" {
            try set(CURLOPT_NOBODY, 1, "CURLOPT_NOBODY")
        } else {
            try set(CURLOPT_HTTPGET, 1, "CURLOPT_HTTPGET")
        }

        // Headers. "Name:" removes a header libcurl would add; "Name;" sends one with an empty value.
        // Each line is built in one reused buffer, not a String per line nor a Set of the names
        // lowercased: this runs for every delivery (docs/PERFORMANCE.md, *In the code*).
        var sendsExpect = false
        var sendsContentType = false
        var line: [UInt8] = []
        line.reserveCapacity(128)
        for header in request.headers {
            sendsExpect = sendsExpect || header.name.equalsASCIICaseInsensitively("expect")
            sendsContentType = sendsContentType || header.name.equalsASCIICaseInsensitively("content-type")
            line.removeAll(keepingCapacity: true)
            line.append(contentsOf: header.name.utf8)
            if header.value.isEmpty {
                line.append(UInt8(ascii: ";"))
            } else {
                line.append(contentsOf: ": ".utf8)
                line.append(contentsOf: header.value.utf8)
            }
            line.append(0)
            try appendHeaderLine(line)
        }
        if !sendsExpect {
            try appendHeaderLine(Self.noExpectLine)  // no 100-continue round trip for large bodies
        }
        if sendsBody && !sendsContentType {
            try appendHeaderLine(Self.noContentTypeLine)  // not libcurl's application/x-www-form-urlencoded
        }
        try check(subsync_curl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headerList), "CURLOPT_HTTPHEADER")
    }

    private static let noExpectLine = Array("Expect:\0".utf8)
    private static let noContentTypeLine = Array("Content-Type:\0".utf8)

    /// Appends a NUL-terminated line to the request's header list (libcurl copies it).
    private func appendHeaderLine(_ line: [UInt8]) throws(CurlError) {
        let appended = line.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { curl_slist_append(headerList, $0.baseAddress) }
        }
        guard let appended else {
            throw CurlError.other(code: Int(CURLE_OUT_OF_MEMORY.rawValue), message: "curl_slist_append failed")
        }
        headerList = appended
    }

    /// Releases the easy handle, the header list, the error buffer and the callbacks' reference,
    /// each exactly once. The handle must already be out of the multi handle.
    ///
    /// With `keepingHandle`, the handle is not freed but reset (`curl_easy_reset`: every option
    /// back to its default, so no URL, header, body, callback or pointer of this transfer stays
    /// on it) and returned, for the loop to configure for its next transfer. That saves the
    /// allocation and freeing of libcurl's per-handle state and buffers on every request; the
    /// connections themselves live in the multi handle's cache either way.
    @discardableResult
    func cleanup(keepingHandle: Bool = false) -> UnsafeMutableRawPointer? {
        var kept: UnsafeMutableRawPointer?
        if let easy {
            if keepingHandle {
                curl_easy_reset(easy)
                kept = easy
            } else {
                curl_easy_cleanup(easy)
            }
            self.easy = nil
        }
        // libcurl reads the header list until the transfer ends, so it is freed only after cleanup
        // (or reset, which forgets the list).
        if let headerList {
            curl_slist_free_all(headerList)
            self.headerList = nil
        }
        if let errorBuffer {
            errorBuffer.deallocate()
            self.errorBuffer = nil
        }
        // Balances `passRetained` in `start`: after `curl_easy_cleanup` or `curl_easy_reset`
        // (which unsets the callbacks and their data pointers) no callback can run.
        callbackReference?.release()
        callbackReference = nil
        return kept
    }

    /// The outcome of a transfer libcurl reports done. Call before `cleanup`.
    func complete(_ code: CURLcode) -> Result<CurlResponse, any Error> {
        guard let easy else {
            return .failure(CurlError.other(code: Int(code.rawValue), message: "transfer has no handle"))
        }
        guard code == CURLE_OK else {
            return .failure(error(for: code))
        }
        var status = 0
        _ = subsync_curl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        var microseconds: curl_off_t = 0
        _ = subsync_curl_easy_getinfo_off_t(easy, CURLINFO_TOTAL_TIME_T, &microseconds)
        return .success(
            CurlResponse(
                status: status,
                headerBlock: responseHeaderBlock,
                body: responseBody,
                truncated: truncated,
                totalTime: .microseconds(Int64(microseconds))))
    }

    private func error(for code: CURLcode) -> CurlError {
        var message = ""
        if let errorBuffer, errorBuffer.pointee != 0 {
            message = String(cString: errorBuffer)
        }
        if message.isEmpty {
            message = String(cString: curl_easy_strerror(code))
        }
        switch code {
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT:
            return .invalidURL(message)
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            return .couldNotResolve(message)
        case CURLE_COULDNT_CONNECT:
            if let refusedAddress, permittedSockets == 0 {
                return .addressNotAllowed(
                    "refused to connect to \(refusedAddress): not a public address and not in the allowlist")
            }
            return .couldNotConnect(message)
        case CURLE_OPERATION_TIMEDOUT:
            return .timedOut(message)
        case CURLE_TOO_MANY_REDIRECTS:
            return .tooManyRedirects(message)
        default:
            return .other(code: Int(code.rawValue), message: message)
        }
    }

    // MARK: - Callbacks (loop thread, inside curl_multi_perform)

    func receiveBody(_ data: UnsafeRawBufferPointer) {
        let room = max(0, request.maximumResponseBytes - responseBody.count)
        if data.count > room {
            truncated = true
        }
        if room > 0 {
            responseBody.append(contentsOf: data.prefix(room))
        }
    }

    func receiveHeaderLine(_ data: UnsafeRawBufferPointer) {
        responseHeaderBlock.receive(data)
    }

    private func openSocket(_ address: UnsafeMutablePointer<curl_sockaddr>) -> curl_socket_t {
        var bytes = [UInt8](repeating: 0, count: 16)
        let count = bytes.withUnsafeMutableBufferPointer { subsync_curl_sockaddr_address(address, $0.baseAddress) }
        guard let ip = IPAddress(bytes: bytes.prefix(Int(count))) else {
            refusedAddress = "an address of family \(address.pointee.family)"
            return subsync_curl_socket_bad()
        }
        guard addressGuard.permits(ip) else {
            refusedAddress = ip.description
            return subsync_curl_socket_bad()
        }
        permittedSockets += 1
        return subsync_curl_open_socket(address)
    }
}

extension Duration {
    /// Milliseconds for a libcurl timeout option: at least 1 (0 would mean "no timeout"), at most ~24 days.
    var curlMilliseconds: Int {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 1 }
        let cap = Int64(Int32.max)
        guard seconds < cap / 1000 else { return Int(cap) }
        let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return Int(max(1, min(milliseconds, cap)))
    }
}
