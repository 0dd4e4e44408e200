/// An HTTP request to send.
public struct CurlRequest: Sendable {
    /// An absolute `http://` or `https://` URL.
    public var url: String
    /// The request method, `POST` by default. Must be an HTTP token (letters, digits, `!#$%&'*+-.^_|~`).
    public var method: String
    /// Request headers in order. Names and values must not contain CR, LF or NUL.
    /// Without a `Content-Type` header none is sent (libcurl's form default is suppressed).
    public var headers: [(name: String, value: String)]
    /// The request body. Sent (with `Content-Length`) for POST, and for any method when not empty.
    public var body: [UInt8]
    /// How long connecting (TCP and TLS) may take.
    public var connectTimeout: Duration
    /// How long the whole transfer may take, from when it starts on the loop thread.
    public var totalTimeout: Duration
    /// Response body bytes kept; the rest is read and dropped, and the response is marked `truncated`.
    public var maximumResponseBytes: Int
    /// When set, a request still waiting for a free slot (`maximumConnectionsPerHost`,
    /// `maximumConcurrentTransfers`) at this time is not sent at all: it fails with
    /// `CurlError.notStarted`. For callers whose request is only valid for a while (a webhook
    /// sender's lease on the delivery), since `totalTimeout` only starts once it is sent.
    public var startBy: ContinuousClock.Instant?

    public init(
        url: String,
        method: String = "POST",
        headers: [(name: String, value: String)] = [],
        body: [UInt8] = [],
        connectTimeout: Duration = .seconds(5),
        totalTimeout: Duration = .seconds(15),
        maximumResponseBytes: Int = 65_536,
        startBy: ContinuousClock.Instant? = nil
    ) {
        self.url = url
        self.method = method
        self.headers = headers
        self.body = body
        self.connectTimeout = connectTimeout
        self.totalTimeout = totalTimeout
        self.maximumResponseBytes = maximumResponseBytes
        self.startBy = startBy
    }
}
