import Crypto
import Curl
import Foundation
import Logging
import ServiceLifecycle
import SyncCore

/// AdMob's server-side verification keys (ECDSA P-256), by `key_id`, from a file in AdMob's
/// published format and, when a URL is configured, refreshed from it through libcurl:
///
/// ```json
/// {"keys": [{"keyId": 3335741209, "pem": "-----BEGIN PUBLIC KEY-----\n...", "base64": "MFkw..."}]}
/// ```
///
/// Google rotates the keys; a callback signed with an id not known yet makes one refresh (at most
/// one a minute), and ``AdMobKeyRefresher`` refreshes daily.
public actor AdMobKeys {
    public struct Source: Sendable {
        public var file: String?
        public var url: String?

        public init(file: String? = nil, url: String? = nil) {
            self.file = file
            self.url = url
        }
    }

    public enum LoadError: Error, CustomStringConvertible {
        case unreadable(String)
        case malformed(String)

        public var description: String {
            switch self {
            case .unreadable(let text): "cannot read AdMob keys: \(text)"
            case .malformed(let text): "AdMob keys are not in AdMob's format: \(text)"
            }
        }
    }

    let source: Source
    let client: CurlClient?
    let clock: any ServiceClock
    let logger: Logger
    private var keys: [Int64: P256.Signing.PublicKey] = [:]
    private var lastFetch: Date?

    public init(source: Source, addressGuard: AddressGuard = .publicOnly, clock: any ServiceClock, logger: Logger) {
        self.source = source
        self.client = source.url == nil ? nil : CurlClient(configuration: .init(addressGuard: addressGuard, userAgent: "subsync-admob-keys/1"))
        self.clock = clock
        self.logger = logger
    }

    /// Loads the file (if any) and fetches the URL (if any); a failed fetch keeps what is known.
    public func load() async throws {
        if let file = source.file {
            guard let data = FileManager.default.contents(atPath: file) else { throw LoadError.unreadable(file) }
            keys.merge(try Self.parse(data)) { $1 }
        }
        if source.url != nil { await refresh() }
    }

    /// The key with `id`, refreshing from the URL once (at most once a minute) when it is unknown.
    public func key(_ id: Int64) async -> P256.Signing.PublicKey? {
        if let key = keys[id] { return key }
        if source.url != nil, lastFetch.map({ clock.now().timeIntervalSince($0) >= 60 }) ?? true {
            await refresh()
        }
        return keys[id]
    }

    /// Fetches the URL and adds its keys (keys no longer listed stay, for callbacks in flight).
    public func refresh() async {
        guard let url = source.url, let client else { return }
        lastFetch = clock.now()
        do {
            let response = try await client.execute(CurlRequest(url: url, method: "GET", totalTimeout: .seconds(10), maximumResponseBytes: 256 * 1024))
            guard response.status == 200 else {
                logger.warning("AdMob key fetch answered \(response.status)", metadata: ["url": "\(url)"])
                return
            }
            keys.merge(try Self.parse(Data(response.body))) { $1 }
        } catch {
            logger.warning("AdMob key fetch failed", metadata: ["url": "\(url)", "error": "\(error)"])
        }
    }

    public var count: Int { keys.count }

    static func parse(_ data: Data) throws -> [Int64: P256.Signing.PublicKey] {
        struct Document: Decodable {
            struct Key: Decodable {
                var keyId: Int64
                var pem: String?
                var base64: String?
            }
            var keys: [Key]
        }
        let document: Document
        do {
            document = try JSONDecoder().decode(Document.self, from: data)
        } catch {
            throw LoadError.malformed("\(error)")
        }
        var keys: [Int64: P256.Signing.PublicKey] = [:]
        for key in document.keys {
            do {
                if let pem = key.pem {
                    keys[key.keyId] = try P256.Signing.PublicKey(pemRepresentation: pem)
                } else if let base64 = key.base64, let der = Data(base64Encoded: base64) {
                    keys[key.keyId] = try P256.Signing.PublicKey(derRepresentation: der)
                } else {
                    throw LoadError.malformed("key \(key.keyId) has neither pem nor base64")
                }
            } catch let error as LoadError {
                throw error
            } catch {
                throw LoadError.malformed("key \(key.keyId) is not an ECDSA P-256 public key")
            }
        }
        return keys
    }

    func shutdown() {
        client?.shutdown()
    }
}

/// Refreshes ``AdMobKeys`` from its URL once a day while the service runs.
struct AdMobKeyRefresher: Service {
    let keys: AdMobKeys
    let clock: any ServiceClock

    func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                try await cancelWhenGracefulShutdown { try await clock.sleep(for: .seconds(86_400)) }
            } catch {
                break
            }
            await keys.refresh()
        }
        await keys.shutdown()
    }
}
