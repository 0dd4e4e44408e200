import CLibPQ
import Foundation

/// How to reach a PostgreSQL server: libpq connection keywords and their values.
///
/// Built from a `postgresql://` URL or a `key=value` string by libpq's own parser
/// (`PQconninfoParse`), or from explicit key/values. The values go to `PQconnectdbParams`
/// as separate arrays, so no value is ever spliced into a connection string.
public struct ConnectionConfiguration: Sendable, CustomStringConvertible {
    /// Keywords in the order they were given (libpq gives later ones precedence).
    public private(set) var parameters: [(key: String, value: String)]

    /// The longest silence from the server, in seconds, while a statement runs: past it the
    /// statement fails with `.connectionLost` and the connection is closed, so a server that
    /// accepts connections but does not answer (stopped, wedged) cannot hang a caller for ever.
    /// `nil` (the default) waits as long as the server takes, as operator commands want; `serve`
    /// sets `SUBSYNC_DB_ANSWER_TIMEOUT_SECONDS`. Not a libpq keyword: it bounds our own `poll`.
    /// Migration scripts (``Connection/execute(script:)``) always wait.
    public var answerTimeout: Double?

    /// Settings subsync relies on when decoding results: UTC timestamps in ISO style,
    /// UTF-8 text, floats that round-trip.
    static let sessionOptions = "-c TimeZone=UTC -c DateStyle=ISO,YMD -c IntervalStyle=iso_8601 -c extra_float_digits=3"

    /// Defaults for subsync's statements, before the user's `options` so that those can change
    /// them. JIT compilation is off: every statement here is short, and the planner's cost
    /// estimates for the claims (subqueries per candidate row) cross `jit_above_cost`, so
    /// PostgreSQL would compile the delivery claim on every call, far longer than the statement
    /// runs (docs/PERFORMANCE.md, *In the code*).
    static let defaultOptions = "-c jit=off"

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
            // libpq quotes the offending part, which can be the password or the whole URL.
            let safe = Self.redactingSecrets(of: url, in: message.trimmingTrailingNewlines())
            throw PostgresError(.connectionFailed, message: "invalid database URL: \(safe)")
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

    /// `message` with every password-like part of `connectionString` replaced by `***`: the
    /// user-info password of a URL (raw and percent-decoded), `password=`/`sslpassword=` query
    /// parameters and keywords.
    static func redactingSecrets(of connectionString: String, in message: String) -> String {
        var secrets: [String] = []
        func add(_ secret: Substring) {
            guard !secret.isEmpty else { return }
            secrets.append(String(secret))
            if let decoded = String(secret).removingPercentEncoding, !decoded.isEmpty { secrets.append(decoded) }
        }
        if let schemeEnd = connectionString.range(of: "://") {
            let rest = connectionString[schemeEnd.upperBound...]
            let authority = rest.prefix { $0 != "/" && $0 != "?" }
            if let at = authority.lastIndex(of: "@") {
                let userInfo = authority[..<at]
                if let colon = userInfo.firstIndex(of: ":") { add(userInfo[userInfo.index(after: colon)...]) }
            }
            if let query = rest.firstIndex(of: "?") {
                for pair in rest[rest.index(after: query)...].split(separator: "&") {
                    let parts = pair.split(separator: "=", maxSplits: 1)
                    if parts.count == 2, secretKeys.contains(String(parts[0])) { add(parts[1]) }
                }
            }
        }
        // key=value form: password = value, password='quoted value' (this finds sslpassword too)
        var searchStart = connectionString.startIndex
        while let keyword = connectionString.range(of: "password", range: searchStart..<connectionString.endIndex) {
            searchStart = keyword.upperBound
            var cursor = connectionString[keyword.upperBound...].drop { $0 == " " }
            guard cursor.first == "=" else { continue }
            cursor = cursor.dropFirst().drop { $0 == " " }
            if cursor.first == "'" {
                add(cursor.dropFirst().prefix { $0 != "'" })
            } else {
                add(cursor.prefix { $0 != " " })
            }
        }
        var result = message
        for secret in secrets.sorted(by: { $0.count > $1.count }) {
            result = result.replacingOccurrences(of: secret, with: "***")
        }
        return result
    }

    /// The value of a keyword, if set.
    public subscript(key: String) -> String? {
        get { parameters.last(where: { $0.key == key })?.value }
        set {
            parameters.removeAll { $0.key == key }
            if let newValue { parameters.append((key, newValue)) }
        }
    }

    /// The parameters handed to libpq: the configured ones plus subsync's default options (before
    /// any `options` the user gave) and session options (after them), UTF-8 as the client
    /// encoding, and a connect timeout when none is set.
    var effectiveParameters: [(key: String, value: String)] {
        var result = self
        let userOptions = self["options"].map { $0 + " " } ?? ""
        result["options"] = Self.defaultOptions + " " + userOptions + Self.sessionOptions
        // Every string subsync sends and decodes is UTF-8, whatever the database's encoding
        // (with a LATIN1 database and no client encoding, the server takes each UTF-8 byte for
        // a character: "é" is two, and text the database cannot hold goes in as mojibake
        // instead of failing).
        result["client_encoding"] = "UTF8"
        if result["connect_timeout"] == nil { result["connect_timeout"] = "5" }
        if result["application_name"] == nil { result["application_name"] = "subsync" }
        return result.parameters
    }

    /// The configuration with secrets replaced, safe for logs.
    public var description: String {
        parameters.map { key, value in
            Self.secretKeys.contains(key) ? "\(key)=***" : "\(key)=\(value)"
        }.joined(separator: " ")
    }

    /// Keywords whose values are secrets: the password, and the passphrase of the client key.
    static let secretKeys: Set<String> = ["password", "sslpassword"]
}

extension String {
    func trimmingTrailingNewlines() -> String {
        var text = self
        while text.last == "\n" || text.last == " " { text.removeLast() }
        return text
    }
}
