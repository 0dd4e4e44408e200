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
    /// folder, `subsync/<account id>`. One client per folder at a time.
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
    /// Timeout of one request, in seconds.
    public var requestTimeout: TimeInterval = 30
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

    static func defaultStorage(accountID: String) -> URL {
        let base = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first
            ?? FileManager.default.temporaryDirectory
        let safe = String(accountID.unicodeScalars.map { scalar -> Character in
            CharacterSet.alphanumerics.contains(scalar) || "._-@".unicodeScalars.contains(scalar) ? Character(scalar) : "_"
        })
        return base.appendingPathComponent("subsync").appendingPathComponent(safe)
    }
}
