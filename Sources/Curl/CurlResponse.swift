/// The answer to a `CurlRequest`: any HTTP status, including 3xx (redirects are never followed).
public struct CurlResponse: Sendable {
    /// The HTTP status code.
    public var status: Int
    /// The headers of the final response (not of any 1xx before it), names lowercased, in order.
    /// A response from the loop keeps them as libcurl sent them and parses them here, on the
    /// first read by whoever reads them, not on the loop thread for every response.
    public var headers: [(name: String, value: String)] {
        get {
            switch headerStorage {
            case .fields(let fields): fields
            case .block(let block): block.fields
            }
        }
        set { headerStorage = .fields(newValue) }
    }
    /// The response body, at most `maximumResponseBytes` of it.
    public var body: [UInt8]
    /// Whether the body was longer than `maximumResponseBytes` and was cut.
    public var truncated: Bool
    /// The whole transfer's duration as libcurl measured it (`CURLINFO_TOTAL_TIME_T`).
    public var totalTime: Duration

    private enum HeaderStorage: Sendable {
        case fields([(name: String, value: String)])
        case block(CurlHeaderBlock)
    }

    private var headerStorage: HeaderStorage

    public init(
        status: Int,
        headers: [(name: String, value: String)] = [],
        body: [UInt8] = [],
        truncated: Bool = false,
        totalTime: Duration = .zero
    ) {
        self.init(status: status, headerStorage: .fields(headers), body: body, truncated: truncated, totalTime: totalTime)
    }

    init(status: Int, headerBlock: CurlHeaderBlock, body: [UInt8], truncated: Bool, totalTime: Duration) {
        self.init(status: status, headerStorage: .block(headerBlock), body: body, truncated: truncated, totalTime: totalTime)
    }

    private init(status: Int, headerStorage: HeaderStorage, body: [UInt8], truncated: Bool, totalTime: Duration) {
        self.status = status
        self.headerStorage = headerStorage
        self.body = body
        self.truncated = truncated
        self.totalTime = totalTime
    }

    /// The value of the first header called `name`, compared case-insensitively.
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.name == wanted }?.value
    }
}
