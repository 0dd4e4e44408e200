import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How a ``SubsyncClient`` reaches the service and where it keeps its files.
public struct SubsyncConfiguration: Sendable {
    /// The service's base URL (`https://sync.example.com`).
    public var baseURL: URL
    /// The account this app's user is (the `sub` of their account tokens).
    public var accountID: String
    /// Mints or fetches an account token (a JWT the app's backend signs with
    /// `SUBSYNC_TOKEN_SECRET`, or `subsync tokens mint` in development). Asked again when the
    /// service refuses the one it gave.
    public var tokenProvider: @Sendable () async throws -> String
    /// Where the outbox and the cached state live: by default the app's Application Support
    /// folder, `subsync/<account id>` (an id that is not a plain file name gets a digest, see
    /// docs/CLIENT.md). One client per folder at a time.
    public var storageDirectory: URL
    /// This install's device id; `nil`: one is made on first use and kept in the storage folder.
    public var deviceID: String?
    /// `ios`, `macos`, ... (informational, shown to support).
    public var platform: String?
    public var appVersion: String?
    public var session: URLSession
    /// How long `POST /sync` waits for the reports to be resolved, so the answer carries the
    /// state they make (read-your-writes; the service caps it).
    public var waitMilliseconds = 2_000
    /// At most this many reports per request (the service takes 100).
    public var batchSize = 100
    /// The first wait after a failure, in seconds; it doubles with each failure in a row.
    public var initialBackoff: TimeInterval = 1
    /// The longest wait between attempts, in seconds.
    public var maximumBackoff: TimeInterval = 300
    /// Timeout of one request, in seconds: the most it may take in all, from sending to the
    /// answer's last byte (a server trickling an endless answer cannot hold the outbox), and the
    /// most the connection may stay silent.
    public var requestTimeout: TimeInterval = 30
    /// The longest answer the client reads, in bytes (default 4 MiB; the service's largest answers,
    /// an account with its entitlements and usage, are a few kilobytes). A longer one is
    /// ``SubsyncClientError/answerTooLarge(limit:)``: the client stops reading it as soon as the
    /// length is known (`Content-Length`) or the limit is passed.
    public var maximumAnswerBytes = 4 << 20
    /// Allow an `http://` base URL that is not loopback. Off: the account token must never cross
    /// a network in clear, so ``SubsyncClient/init(configuration:)`` refuses such a URL; turn it
    /// on only for a development server on your own network.
    public var allowsInsecureHTTP = false
    /// The time: expiry dates are compared with it (tests set their own).
    public var now: @Sendable () -> Date = { Date() }
    /// Waits that many seconds (tests may record or shorten waits; the default sleeps).
    public var sleep: @Sendable (TimeInterval) async throws -> Void = { seconds in
        try await Task.sleep(nanoseconds: UInt64(max(0, min(seconds, 86_400)) * 1_000_000_000))
    }

    public init(
        baseURL: URL, accountID: String, storageDirectory: URL? = nil, deviceID: String? = nil,
        session: URLSession = .shared, tokenProvider: @escaping @Sendable () async throws -> String
    ) {
        self.baseURL = baseURL
        self.accountID = accountID
        self.tokenProvider = tokenProvider
        self.deviceID = deviceID
        self.session = session
        self.storageDirectory = storageDirectory ?? Self.defaultStorage(accountID: accountID)
    }

    /// Why ``baseURL`` cannot be used, if it cannot: not `https://` (or `http://` to a loopback
    /// address, or with ``allowsInsecureHTTP``).
    var baseURLProblem: String? {
        let scheme = baseURL.scheme?.lowercased()
        guard let host = baseURL.host?.lowercased(), !host.isEmpty else { return "the base URL \(baseURL) has no host" }
        switch scheme {
        case "https": return nil
        case "http":
            let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
            let octets = bare.split(separator: ".", omittingEmptySubsequences: false)
            let loopback = bare == "localhost" || bare == "::1"
                || (octets.count == 4 && octets.first == "127" && octets.allSatisfy { Int($0).map { (0...255).contains($0) } ?? false })
            if loopback || allowsInsecureHTTP { return nil }
            return "the base URL \(baseURL) is http:// to another machine: account tokens would cross the network in clear; use https:// (or set allowsInsecureHTTP for a development server)"
        default:
            return "the base URL \(baseURL) is not https://"
        }
    }

    /// Application Support, where the default storage folders are.
    static var applicationSupport: URL {
        FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first
            ?? FileManager.default.temporaryDirectory
    }

    /// The default storage folder of `accountID`: `<base>/subsync/<account id>` when the id is a
    /// file name as it is (letters, digits and `._-@`, not only dots). Any other id has each
    /// other character replaced by `_` and a digest of the whole id appended
    /// (`subsync/a_b-3f2c...`): two accounts never share a folder, as `a:b` and `a_b` did when
    /// the replacement alone named it, and no id names a folder above `subsync` (`..`).
    static func defaultStorage(accountID: String, base: URL = applicationSupport) -> URL {
        let folder = base.appendingPathComponent("subsync")
        let replaced = replacingUnsafeCharacters(accountID)
        guard replaced != accountID || replaced.allSatisfy({ $0 == "." }) else { return folder.appendingPathComponent(accountID) }
        return folder.appendingPathComponent(replaced + "-" + SHA256.hex(accountID).prefix(16))
    }

    /// The folder that earlier releases used for an id ``defaultStorage(accountID:base:)``
    /// now digests: the replacement alone. Nil for ids whose folder did not change, and for
    /// those that named no folder of their own (only dots).
    static func legacyStorage(accountID: String, base: URL = applicationSupport) -> URL? {
        let replaced = replacingUnsafeCharacters(accountID)
        guard replaced != accountID, !replaced.allSatisfy({ $0 == "." }) else { return nil }
        return base.appendingPathComponent("subsync").appendingPathComponent(replaced)
    }

    private static func replacingUnsafeCharacters(_ accountID: String) -> String {
        String(accountID.unicodeScalars.map { scalar -> Character in
            CharacterSet.alphanumerics.contains(scalar) || "._-@".unicodeScalars.contains(scalar) ? Character(scalar) : "_"
        })
    }
}
