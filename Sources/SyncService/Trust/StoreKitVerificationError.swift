import SyncCore

/// Why a StoreKit 2 JWS (a signed transaction, renewal info or App Store Server Notification) was
/// rejected by ``StoreKitVerifier``. Each case has a stable ``code`` for API responses and logs.
public enum StoreKitVerificationError: Error, Sendable, Equatable, Hashable {
    /// The JWS signature does not verify with the leaf certificate's key (tampered header or payload,
    /// or signed by another key).
    case badSignature
    /// The `x5c` chain is missing, not three certificates long, does not lead to a trusted root, or
    /// lacks Apple's certificate policy OIDs. The associated text is for logs only.
    case untrustedChain(String)
    /// The payload's bundle id is not the configured one (or is missing where the payload must carry it).
    case wrongBundle(String?)
    /// The payload's environment is missing, unknown or not among the allowed ones.
    case wrongEnvironment(String?)
    /// A certificate of the chain was not valid at the payload's signed date.
    case certificateExpired
    /// The token is not a well-formed compact JWS, or its header or payload does not decode.
    /// The associated text is for logs only.
    case malformed(String)
    /// The header's `alg` is not `ES256`.
    case unsupportedAlgorithm(String?)
    /// The payload's app Apple id is not the configured one.
    case wrongApp(Int64?)
    /// Signed payloads that go together (a renewal info and its transaction, a notification and
    /// the transaction or renewal info inside it, an App Store Server API answer and the API)
    /// name different environments: this payload's, then the one it goes with.
    case environmentMismatch(String?, String?)

    /// Refuses `payload`'s environment unless it is `expected`, the environment of what it goes
    /// with (already checked against the configuration).
    static func requireSameEnvironment(
        _ payload: some StoreKitSignedPayload, as expected: StoreEnvironment
    ) throws(StoreKitVerificationError) {
        let raw = payload.signedEnvironment
        guard raw.flatMap({ StoreEnvironment(rawValue: $0.lowercased()) }) == expected else {
            throw .environmentMismatch(raw, expected.rawValue)
        }
    }

    /// The stable machine-readable code of the error.
    public var code: String {
        switch self {
        case .badSignature: "bad_signature"
        case .untrustedChain: "untrusted_chain"
        case .wrongBundle: "wrong_bundle"
        case .wrongEnvironment: "wrong_environment"
        case .certificateExpired: "certificate_expired"
        case .malformed: "malformed"
        case .unsupportedAlgorithm: "unsupported_algorithm"
        case .wrongApp: "wrong_app"
        case .environmentMismatch: "environment_mismatch"
        }
    }
}

extension StoreKitVerificationError: CustomStringConvertible {
    /// The code followed by the detail, for logs. Every detail that came from the token (its
    /// `alg`, bundle id, environment, parse errors quoting it) is quoted with control characters
    /// escaped and cut at 120 characters, so a token cannot forge log lines or flood the log.
    public var description: String {
        switch self {
        case .badSignature, .certificateExpired: code
        case .untrustedChain(let reason), .malformed(let reason): "\(code): \(Self.quoted(reason))"
        case .wrongBundle(let bundle): "\(code): \(Self.quoted(bundle))"
        case .wrongEnvironment(let environment): "\(code): \(Self.quoted(environment))"
        case .unsupportedAlgorithm(let alg): "\(code): \(Self.quoted(alg))"
        case .wrongApp(let app): "\(code): \(app.map(String.init) ?? "none")"
        case .environmentMismatch(let environment, let expected): "\(code): \(Self.quoted(environment)), not \(Self.quoted(expected))"
        }
    }

    /// `text` in double quotes, with quotes, backslashes and every control character escaped
    /// (`\n`, `\u{1B}`), at most 120 characters of it; `none` for nil.
    static func quoted(_ text: String?) -> String {
        guard let text else { return "none" }
        var escaped = ""
        for scalar in text.unicodeScalars.prefix(120) {
            switch scalar {
            case "\"": escaped += "\\\""
            case "\\": escaped += "\\\\"
            case "\n": escaped += "\\n"
            case "\r": escaped += "\\r"
            case "\t": escaped += "\\t"
            default:
                if scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .format {
                    escaped += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
                } else {
                    escaped.unicodeScalars.append(scalar)
                }
            }
        }
        return "\"" + escaped + (text.unicodeScalars.count > 120 ? "…" : "") + "\""
    }
}
