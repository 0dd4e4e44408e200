import Foundation

/// The last known state and the catalogue's tiers, in `<storage>/state.json`, written atomically
/// and durably (``DurableFile``).
struct StateStore {
    struct Contents: Sendable, Codable, Equatable {
        var version = 1
        var account: AccountSnapshot?
        var tiers: [TierSnapshot]?
    }

    let url: URL
    private(set) var contents = Contents()

    init(url: URL) {
        self.url = url
    }

    /// The contents of the state file at `url`, without touching it.
    static func read(_ url: URL) throws -> Contents {
        let loaded = try WireFormat.decoder().decode(Contents.self, from: Data(contentsOf: url))
        guard loaded.version == 1 else { throw Outbox.UnknownVersion(version: loaded.version) }
        return loaded
    }

    /// Reads the file; an unreadable one is moved to `state.json.corrupt` and reported.
    mutating func load() -> SubsyncClientError? {
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        do {
            contents = try Self.read(url)
            return nil
        } catch {
            let aside = url.appendingPathExtension("corrupt")
            try? FileManager.default.removeItem(at: aside)
            if (try? FileManager.default.moveItem(at: url, to: aside)) == nil { try? FileManager.default.removeItem(at: url) }
            return .corruptFile(path: url.path, reason: Outbox.reason(error))
        }
    }

    mutating func save(_ new: Contents) throws(SubsyncClientError) {
        guard new != contents else { return }
        do {
            try DurableFile.store(try WireFormat.encoder().encode(new), at: url)
        } catch {
            throw .storage(path: url.path, reason: "\(error)")
        }
        contents = new
    }
}
