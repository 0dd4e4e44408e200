import CLibPQ

/// How to reach a PostgreSQL server: libpq connection keywords and their values.
///
/// Built from a `postgresql://` URL or a `key=value` string by libpq's own parser
/// (`PQconninfoParse`), or from explicit key/values. The values go to `PQconnectdbParams`
/// as separate arrays, so no value is ever spliced into a connection string.
public struct ConnectionConfiguration: Sendable, CustomStringConvertible {
    /// Keywords in the order they were given (libpq gives later ones precedence).
    public private(set) var parameters: [(key: String, value: String)]

    /// Settings subsync relies on when decoding results: UTC timestamps in ISO style,
    /// UTF-8 text, floats that round-trip.
    static let sessionOptions = "-c TimeZone=UTC -c DateStyle=ISO,YMD -c IntervalStyle=iso_8601 -c extra_float_digits=3"

    /// Creates a configuration from explicit libpq keywords, such as `["host": "/tmp", "dbname": "app"]`.
    public init(_ parameters: [(key: String, value: String)]) {
        self.parameters = parameters
    }

    /// Parses a `postgresql://user:pass@host:port/db?param=value` URL or a `key=value ...` string.
    ///
    /// - Throws: ``PostgresError`` of kind `.connectionFailed` naming what libpq could not parse.
    public init(url: String) throws {
        var errorMessage: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(url, &errorMessage) else {
            let message = errorMessage.map { String(cString: $0) } ?? "invalid connection string"
            if let errorMessage { PQfreemem(errorMessage) }
            throw PostgresError(.connectionFailed, message: "invalid database URL: \(message.trimmingTrailingNewlines())")
        }
        defer { PQconninfoFree(options) }
        var parsed: [(key: String, value: String)] = []
        var cursor = options
        while let keyword = cursor.pointee.keyword {
            if let value = cursor.pointee.val {
                parsed.append((String(cString: keyword), String(cString: value)))
            }
            cursor += 1
        }
        self.parameters = parsed
    }

    /// The value of a keyword, if set.
    public subscript(key: String) -> String? {
        get { parameters.last(where: { $0.key == key })?.value }
        set {
            parameters.removeAll { $0.key == key }
            if let newValue { parameters.append((key, newValue)) }
        }
    }

    /// The parameters handed to libpq: the configured ones plus subsync's session options
    /// (appended to any `options` the user gave) and a connect timeout when none is set.
    var effectiveParameters: [(key: String, value: String)] {
        var result = self
        let userOptions = self["options"].map { $0 + " " } ?? ""
        result["options"] = userOptions + Self.sessionOptions
        if result["connect_timeout"] == nil { result["connect_timeout"] = "5" }
        if result["application_name"] == nil { result["application_name"] = "subsync" }
        return result.parameters
    }

    /// The configuration with secrets replaced, safe for logs.
    public var description: String {
        parameters.map { key, value in
            key == "password" ? "\(key)=***" : "\(key)=\(value)"
        }.joined(separator: " ")
    }
}

extension String {
    func trimmingTrailingNewlines() -> String {
        var text = self
        while text.last == "\n" || text.last == " " { text.removeLast() }
        return text
    }
}
