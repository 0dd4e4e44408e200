import Foundation
import Testing
@testable import SubsyncClient

/// The client's own parts, without a service: content-derived ids, the disk outbox, the cache
/// and the offline rule (the service-backed tests are in SyncServiceTests/ClientTests.swift).
@Suite struct ClientStorageTests {
    /// A fresh storage folder, removed afterwards.
    static func withFolder<T>(_ body: (URL) async throws -> T) async throws -> T {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("subsync-client-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        return try await body(folder)
    }

    /// A client of a service that is not there (port 9 on loopback refuses at once).
    static func offlineClient(_ folder: URL, now: @escaping @Sendable () -> Date = { Date() }) throws -> SubsyncClient {
        var configuration = SubsyncConfiguration(
            baseURL: URL(string: "http://127.0.0.1:9")!, accountID: "ana", storageDirectory: folder, tokenProvider: { "token" })
        configuration.requestTimeout = 5
        configuration.now = now
        return try SubsyncClient(configuration: configuration)
    }

    static func fields(_ id: String, expires: Date? = nil) -> TransactionFields {
        TransactionFields(
            productID: "voip.premium.monthly", originalTransactionID: id, transactionID: id,
            purchasedAt: Date(timeIntervalSince1970: 1_700_000_000), expiresAt: expires)
    }

    @Test("SHA-256 gives the published digests")
    func sha256KnownAnswers() {
        #expect(SHA256.hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
            == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(SHA256.hex(String(repeating: "a", count: 1_000)) == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3")
    }

    @Test("report ids follow the content: the same purchase twice is one id, any change is another")
    func contentDerivedIDs() {
        let jws = Purchase(signedTransaction: "eyJ.a.b")
        #expect(jws.reportID == Purchase(signedTransaction: "eyJ.a.b").reportID)
        #expect(jws.reportID != Purchase(signedTransaction: "eyJ.a.c").reportID)
        #expect(jws.reportID != Purchase(signedTransaction: "eyJ.a.b", signedRenewalInfo: "r").reportID)
        let unsigned = Purchase(transaction: Self.fields("t1"))
        #expect(unsigned.reportID == Purchase(transaction: Self.fields("t1")).reportID)
        var refunded = Self.fields("t1")
        refunded.revokedAt = Date(timeIntervalSince1970: 1_700_000_100)
        #expect(Purchase(transaction: refunded).reportID != unsigned.reportID)
        // A valid report_id for the service: letters, digits and -, at most 128.
        #expect(jws.reportID.count <= 128)
        #expect(jws.reportID.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" })
    }

    @Test("the outbox survives the client: a new client on the same folder has the same items, in order, once")
    func outboxSurvivesRestart() async throws {
        try await Self.withFolder { folder in
            let first = try Self.offlineClient(folder)
            let outcome = try await first.sync([Purchase(transaction: Self.fields("t1")), Purchase(transaction: Self.fields("t2"))])
            guard case .failed(.unreachable, 0) = outcome else {
                Issue.record("expected unreachable, got \(outcome)")
                return
            }
            _ = try await first.sync([Purchase(transaction: Self.fields("t1"))])  // the same again: not a second item
            try await first.reportUsage(meter: "minutes", units: 5, id: "call-1")
            #expect(await first.pendingCount == 3)
            let deviceID = first.deviceID

            let second = try Self.offlineClient(folder)
            #expect(await second.pendingCount == 3)
            #expect(second.deviceID == deviceID, "the device id is kept with the folder")
            let files = try FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent("outbox").path).sorted()
            #expect(files.count == 3)
            #expect(files.first?.hasSuffix("-report.json") == true)
            #expect(files.last?.hasSuffix("-usage.json") == true)
        }
    }

    @Test("a corrupted outbox item or state file is a clear error on the stream, moved aside, and the rest goes on")
    func corruptFilesAreReported() async throws {
        try await Self.withFolder { folder in
            let first = try Self.offlineClient(folder)
            _ = try await first.sync([Purchase(transaction: Self.fields("t1")), Purchase(transaction: Self.fields("t2"))])
            let outbox = folder.appendingPathComponent("outbox")
            let bad = try #require(try FileManager.default.contentsOfDirectory(atPath: outbox.path).sorted().first)
            try Data("{\"version\": 1, \"seq".utf8).write(to: outbox.appendingPathComponent(bad))
            try Data("not json at all".utf8).write(to: folder.appendingPathComponent("state.json"))

            let second = try Self.offlineClient(folder)
            #expect(await second.pendingCount == 1)
            var problems: [SubsyncClientError] = []
            for await error in second.errors {
                problems.append(error)
                if problems.count == 2 { break }
            }
            let paths = problems.compactMap { problem -> String? in
                if case .corruptFile(let path, let reason) = problem, !reason.isEmpty { return URL(fileURLWithPath: path).lastPathComponent }
                return nil
            }
            #expect(Set(paths) == [bad, "state.json"])
            #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("state.json.corrupt").path))
            #expect(try FileManager.default.contentsOfDirectory(atPath: outbox.appendingPathComponent("corrupt").path).count == 1)
            #expect(await second.state() == nil)
            #expect(await second.canUse("video") == false)
        }
    }

    @Test("a durable write replaces the file whole and leaves nothing else in its folder")
    func durableWritesReplaceWhole() async throws {
        try await Self.withFolder { folder in
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let url = folder.appendingPathComponent("item.json")
            try DurableFile.store(Data("first, and longer than the second".utf8), at: url)
            try DurableFile.store(Data("second".utf8), at: url)
            #expect(try Data(contentsOf: url) == Data("second".utf8))
            try DurableFile.store(Data(), at: url)
            #expect(try Data(contentsOf: url).isEmpty)
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path) == ["item.json"])
            let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600, "readable by the app alone")
        }
    }

    @Test("a durable write that cannot take the file's place fails, names the call, and leaves what was there")
    func failedDurableWritesLeaveNothing() async throws {
        try await Self.withFolder { folder in
            // A folder with something in it where the file should go: the rename is refused.
            let url = folder.appendingPathComponent("taken")
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            try Data("kept".utf8).write(to: url.appendingPathComponent("inside"))
            let error = #expect(throws: DurableFile.Failure.self) {
                try DurableFile.store(Data("new".utf8), at: url)
            }
            #expect(error?.call == "rename")
            #expect(error?.description.hasPrefix("rename failed: ") == true)
            #expect(try Data(contentsOf: url.appendingPathComponent("inside")) == Data("kept".utf8))
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path) == ["taken"], "no temporary file left")

            // A folder that is not there: the first call fails, nothing is created.
            let missing = folder.appendingPathComponent("missing/item.json")
            #expect(throws: DurableFile.Failure.self) { try DurableFile.store(Data("x".utf8), at: missing) }
            #expect(!FileManager.default.fileExists(atPath: missing.deletingLastPathComponent().path))
        }
    }

    @Test("each account has its own default folder, below subsync/, and an earlier release's folder is taken over")
    func defaultFoldersAreTheAccounts() async throws {
        try await Self.withFolder { base in
            func folder(_ id: String) -> URL { SubsyncConfiguration.defaultStorage(accountID: id, base: base) }
            let subsync = base.appendingPathComponent("subsync").standardizedFileURL.path
            // Ids that are file names keep the folder they always had.
            #expect(folder("ana").lastPathComponent == "ana")
            #expect(folder("user-42@example.com").lastPathComponent == "user-42@example.com")
            #expect(SubsyncConfiguration.legacyStorage(accountID: "ana", base: base) == nil)
            // Ids the service takes that differ only where a file name cannot hold them.
            let ids = ["a:b", "a_b", "a/b", "a b", ".", "..", "...", "é", "e"]
            let folders = ids.map { folder($0).standardizedFileURL }
            #expect(Set(folders.map(\.path)).count == ids.count, "\(folders.map(\.lastPathComponent))")
            for (id, url) in zip(ids, folders) {
                #expect(url.deletingLastPathComponent().path == subsync, "\(id) stays inside subsync/")
                #expect(!url.lastPathComponent.allSatisfy { $0 == "." }, "\(id)")
            }
            #expect(folder("a:b").lastPathComponent.hasPrefix("a_b-"))

            // A folder an earlier release made for "a:b" (the replacement alone, which is also
            // account "a_b"'s folder) is taken over only when its cached state is "a:b"'s.
            let legacy = try #require(SubsyncConfiguration.legacyStorage(accountID: "a:b", base: base))
            #expect(legacy.lastPathComponent == "a_b")
            func cache(_ owner: String) throws {
                try FileManager.default.createDirectory(at: legacy.appendingPathComponent("outbox"), withIntermediateDirectories: true)
                try Data("d-kept".utf8).write(to: legacy.appendingPathComponent("device-id"))
                let state = #"{"version": 1, "account": {"account_id": "\#(owner)", "tier": "free", "features": [], "limits": {}, "ads": true, "entitlements": []}}"#
                try Data(state.utf8).write(to: legacy.appendingPathComponent("state.json"))
            }
            try cache("a_b")
            SubsyncClient.adopt(legacy: legacy, as: folder("a:b"), accountID: "a:b")
            #expect(FileManager.default.fileExists(atPath: legacy.path), "account a_b's folder stays its own")
            #expect(!FileManager.default.fileExists(atPath: folder("a:b").path))
            try FileManager.default.removeItem(at: legacy)
            try cache("a:b")
            SubsyncClient.adopt(legacy: legacy, as: folder("a:b"), accountID: "a:b")
            #expect(try String(contentsOf: folder("a:b").appendingPathComponent("device-id"), encoding: .utf8) == "d-kept")
            #expect(!FileManager.default.fileExists(atPath: legacy.path))
            // Once the new folder exists, nothing moves again.
            try cache("a:b")
            SubsyncClient.adopt(legacy: legacy, as: folder("a:b"), accountID: "a:b")
            #expect(FileManager.default.fileExists(atPath: legacy.path))
        }
    }

    @Test("a client creates its folders level by level, and a second client finds them made")
    func foldersAreCreatedWhole() async throws {
        try await Self.withFolder { folder in
            // Three levels missing: the storage folder's parent, the storage folder, the outbox.
            let storage = folder.appendingPathComponent("app/support/ana")
            let client = try Self.offlineClient(storage)
            _ = try await client.sync([Purchase(transaction: Self.fields("t1"))])
            var isFolder: ObjCBool = false
            #expect(FileManager.default.fileExists(atPath: storage.appendingPathComponent("outbox").path, isDirectory: &isFolder))
            #expect(isFolder.boolValue)
            let again = try Self.offlineClient(storage)
            #expect(await again.pendingCount == 1)
        }
    }

    @Test("temporary files that a crash left mid-write are deleted when the client opens its folder, and never loaded")
    func interruptedWritesAreCleanedUp() async throws {
        try await Self.withFolder { folder in
            let first = try Self.offlineClient(folder)
            _ = try await first.sync([Purchase(transaction: Self.fields("t1"))])
            let outbox = folder.appendingPathComponent("outbox")
            // What a write interrupted before its rename leaves: a whole item, never acknowledged
            // to the app, and half of one.
            let item = try #require(try FileManager.default.contentsOfDirectory(atPath: outbox.path).first)
            let leftovers = [
                outbox.appendingPathComponent(".0000000000000009-report.json.1F2E\(DurableFile.temporarySuffix)"),
                outbox.appendingPathComponent(".0000000000000010-usage.json.3C4D\(DurableFile.temporarySuffix)"),
                folder.appendingPathComponent(".state.json.5E6F\(DurableFile.temporarySuffix)"),
            ]
            try FileManager.default.copyItem(at: outbox.appendingPathComponent(item), to: leftovers[0])
            try Data("{\"version\": 1, \"seq".utf8).write(to: leftovers[1])
            try Data("{".utf8).write(to: leftovers[2])

            // The storage folder may be the app's too: its own temporary files stay.
            let foreign = folder.appendingPathComponent(".app-notes.json.7A8B\(DurableFile.temporarySuffix)")
            try Data("the app's".utf8).write(to: foreign)

            let second = try Self.offlineClient(folder)
            #expect(await second.pendingCount == 1, "only the item that was written whole")
            for leftover in leftovers {
                #expect(!FileManager.default.fileExists(atPath: leftover.path), "\(leftover.lastPathComponent)")
            }
            #expect(FileManager.default.fileExists(atPath: foreign.path), "a temporary file the client did not write")
            #expect(try FileManager.default.contentsOfDirectory(atPath: outbox.path) == [item], "nothing moved aside as corrupt")
        }
    }

    @Test("offline, a cached subscription stops granting its tier when its expiry passes, and the tier below applies")
    func offlineExpiry() async throws {
        try await Self.withFolder { folder in
            let expiry = Date(timeIntervalSince1970: 1_800_000_000)
            let state = """
            {"version": 1,
             "account": {"account_id": "ana", "tier": "premium", "features": ["basic_calling", "video"], "ads": false,
                         "limits": {"monthly_minutes": null}, "next_transition_at": "2027-01-15T08:00:00Z",
                         "received_at": "2027-01-01T00:00:00Z",
                         "entitlements": [{"id": "premium", "tier": "premium", "status": "active", "product_id": "voip.premium.monthly",
                                           "expires_at": "2027-01-15T08:00:00.000000Z", "will_renew": true}]},
             "tiers": [{"id": "free", "rank": 0, "ads": true, "features": ["basic_calling"], "limits": {"monthly_minutes": 100}},
                       {"id": "premium", "rank": 2, "ads": false, "features": ["basic_calling", "video"], "limits": {"monthly_minutes": null}}]}
            """
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Data(state.utf8).write(to: folder.appendingPathComponent("state.json"))
            #expect(WireFormat.parse("2027-01-15T08:00:00.000000Z") == expiry)
            let clock = TestTime(expiry.addingTimeInterval(-60))
            let client = try Self.offlineClient(folder, now: { clock.now })
            #expect(await client.canUse("video"))
            #expect(await client.limit("monthly_minutes") == .unlimited)
            clock.now = expiry
            #expect(await client.canUse("video") == false)
            #expect(await client.canUse("basic_calling"))
            #expect(await client.tier() == "free")
            #expect(await client.limit("monthly_minutes") == .limited(100))
            #expect(await client.state()?.ads == true)
            #expect(await client.entitlements().first?.status == "expired")

            // A state the service answered after the expiry, before its sweeper resolved the
            // account again (still "active", its end already past): not premium either.
            let stale = state.replacingOccurrences(of: "\"received_at\": \"2027-01-01T00:00:00Z\"", with: "\"received_at\": \"2027-01-15T08:00:30Z\"")
            #expect(stale != state)
            try Data(stale.utf8).write(to: folder.appendingPathComponent("state.json"))
            let later = try Self.offlineClient(folder, now: { expiry.addingTimeInterval(60) })
            #expect(await later.tier() == "free")
            #expect(await later.canUse("video") == false)
        }
    }
}

/// A time the test moves.
final class TestTime: @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = NSLock()
    private var value: Date

    init(_ start: Date) { value = start }

    var now: Date {
        get { lock.withLock { value } }
        set { lock.withLock { value = newValue } }
    }
}
