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
/// one a minute), and ``AdMobKeyRefresher`` refreshes daily. A key fetched from the URL that two
/// successful fetches in a row no longer list is **retired** (Google withdrew it: a callback
/// signed with it is refused); keys from the file are the operator's and stay.
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
    /// Keys the file gave (never retired).
    private var fromFile: Set<Int64> = []
    /// Per key fetched from the URL, how many successful fetches in a row did not list it.
    private var unlisted: [Int64: Int] = [:]
    /// Successful fetches in a row without a key before it is retired.
    static let retireAfter = 2

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
            let parsed = try Self.parse(data)
            keys.merge(parsed) { $1 }
            fromFile.formUnion(parsed.keys)
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

    /// Fetches the URL and adds its keys; a key no longer listed stays for callbacks in flight
    /// until ``retireAfter`` successful fetches in a row have not listed it.
    public func refresh() async {
        guard let url = source.url, let client else { return }
        lastFetch = clock.now()
        do {
            let response = try await client.execute(CurlRequest(url: url, method: "GET", totalTimeout: .seconds(10), maximumResponseBytes: 256 * 1024))
            guard response.status == 200 else {
                logger.warning("AdMob key fetch answered \(response.status)", metadata: ["url": "\(url)"])
                return
            }
            let listed = try Self.parse(Data(response.body))
            keys.merge(listed) { $1 }
            for id in listed.keys { unlisted[id] = nil }
            for id in keys.keys where listed[id] == nil && !fromFile.contains(id) {
                unlisted[id, default: 0] += 1
                if unlisted[id, default: 0] >= Self.retireAfter {
                    keys[id] = nil
                    unlisted[id] = nil
                    logger.notice("AdMob key retired: no longer listed by Google", metadata: ["key_id": "\(id)"])
                }
            }
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
