import Crypto
import Foundation
import SyncCore

/// How subsync reaches the App Store Server API (docs/STORE.md): the in-app purchase key, the
/// app, the environment and the rate it may ask at.
///
/// The private key is held as a parsed key, never as text, and no description of this type
/// shows it.
public struct AppStoreAPIConfiguration: Sendable, CustomStringConvertible {
    /// The App Store environment the API answers for.
    public enum Environment: String, Sendable {
        case production
        case sandbox

        /// Apple's base URL for the environment.
        public var baseURL: String {
            switch self {
            case .production: "https://api.storekit.apple.com"
            case .sandbox: "https://api.storekit-sandbox.apple.com"
            }
        }

        /// Apple's published limit for `endpoint` (the names ``AppStoreServerAPI`` gives its
        /// calls), requests per second per app: production's table, a tenth of it in the sandbox
        /// ("Identifying rate limits" in Apple's App Store Server API documentation).
        public func requestsPerSecond(for endpoint: String) -> Double {
            let production: Double =
                switch endpoint {
                case "subscriptions", "history", "notification-history": 50
                case "refunds": 10
                case "test-notification": 1
                default: 1  // an endpoint without a known limit: the lowest Apple publishes
                }
            return self == .production ? production : production / 10
        }
    }

    /// The key's id in App Store Connect (the JWT's `kid`).
    public var keyID: String
    /// The issuer id of the team (the JWT's `iss`).
    public var issuerID: String
    /// The app's bundle id (the JWT's `bid`).
    public var bundleID: String
    /// The in-app purchase key (`.p8`, P-256).
    public var privateKey: P256.Signing.PrivateKey
    public var environment: Environment
    /// ``environment`` as StoreKit payloads name it: every signed answer must be of it.
    public var storeEnvironment: StoreEnvironment {
        switch environment {
        case .production: .production
        case .sandbox: .sandbox
        }
    }
    /// Where requests go: the environment's URL, or a test double's (`SUBSYNC_APPSTORE_BASE_URL`).
    public var baseURL: String
    /// A cap on every endpoint's rate, below Apple's published limits (`nil`: those limits).
    public var requestsPerSecond: Double?
    /// How long one request may take, its answer included.
    public var requestTimeout: Duration
    /// Attempts per call when Apple answers with a retryable error, a 5xx or nothing (1: no retry).
    public var maximumAttempts: Int
    /// The longest a call waits on its own for a `Retry-After` or a backoff; a longer wait is
    /// returned to the caller as ``AppStoreAPIError/rateLimited(until:)`` or the last error.
    public var maximumRetryWait: Duration

    public init(
        keyID: String, issuerID: String, bundleID: String, privateKey: P256.Signing.PrivateKey, environment: Environment,
        baseURL: String? = nil, requestsPerSecond: Double? = nil, requestTimeout: Duration = .seconds(30), maximumAttempts: Int = 4,
        maximumRetryWait: Duration = .seconds(30)
    ) {
        self.keyID = keyID
        self.issuerID = issuerID
        self.bundleID = bundleID
        self.privateKey = privateKey
        self.environment = environment
        self.baseURL = baseURL ?? environment.baseURL
        self.requestsPerSecond = requestsPerSecond
        self.requestTimeout = requestTimeout
        self.maximumAttempts = max(1, maximumAttempts)
        self.maximumRetryWait = maximumRetryWait
    }

    /// The rate kept for `endpoint`: Apple's published limit, or the cap when it is lower.
    public func requestsPerSecond(for endpoint: String) -> Double {
        min(environment.requestsPerSecond(for: endpoint), requestsPerSecond ?? .infinity)
    }

    /// Parses the `.p8` file's text (a PEM PKCS #8 P-256 key, as App Store Connect gives it).
    public static func privateKey(pem: String, source: String) throws(AppStoreAPIConfigurationError) -> P256.Signing.PrivateKey {
        do {
            return try P256.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw .unreadableKey(source: source, reason: "not a PEM P-256 private key (an App Store Connect in-app purchase key, .p8)")
        }
    }

    public var description: String {
        "AppStoreAPIConfiguration(keyID: \(keyID), issuerID: \(issuerID), bundleID: \(bundleID), environment: \(environment.rawValue), baseURL: \(baseURL), privateKey: <redacted>)"
    }
}

/// A setting of the App Store Server API that cannot be used.
public enum AppStoreAPIConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    case unreadableKey(source: String, reason: String)
    case missingSetting(String)
    case invalidSetting(name: String, reason: String)

    public var description: String {
        switch self {
        case .unreadableKey(let source, let reason): "the App Store key \(source) cannot be used: \(reason)"
        case .missingSetting(let name): "\(name) is required when SUBSYNC_APPSTORE_KEY_FILE is set"
        case .invalidSetting(let name, let reason): "\(name): \(reason)"
        }
    }
}
