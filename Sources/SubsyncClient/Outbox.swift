import Foundation

/// The durable outbox: one JSON file per item in `<storage>/outbox`, named by enqueue order, each
/// written atomically and on the disk before `append` returns (``DurableFile``: a temporary file
/// synced and renamed over), so an item survives app kills, reboots, power losses and offline
/// days, and a crash mid-write leaves either the whole file or none.
///
/// Owned by one ``SubsyncClient`` (an actor): not shared between threads.
struct Outbox {
    let directory: URL
    private(set) var items: [OutboxItem] = []
    private var keys: Set<String> = []
    private var nextSequence: Int64 = 1
    /// One encoder for every item.
    private let encoder = WireFormat.encoder()

    /// Opens (creating) the folder and loads every item. An unreadable file is moved to
    /// `outbox/corrupt/` and named in `corrupt`; the others load.
    init(directory: URL) throws(SubsyncClientError) {
        self.directory = directory
        do {
            try DurableFile.createDirectory(directory)
        } catch {
            throw .storage(path: directory.path, reason: "\(error)")
        }
    }

    /// Loads the items on disk; returns the files that could not be read (moved aside).
    mutating func load() throws(SubsyncClientError) -> [SubsyncClientError] {
        let listed: [String]
        do {
            listed = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw .storage(path: directory.path, reason: "\(error)")
        }
        DurableFile.removeLeftovers(in: directory, listed: listed)
        let names = listed.filter { $0.hasSuffix(".json") }
        var problems: [SubsyncClientError] = []
        let decoder = WireFormat.decoder()
        for name in names {
            let url = directory.appendingPathComponent(name)
            do {
                let item = try decoder.decode(OutboxItem.self, from: Data(contentsOf: url))
                guard item.version == 1 else { throw UnknownVersion(version: item.version) }
                items.append(item)
            } catch {
                problems.append(.corruptFile(path: url.path, reason: Self.reason(error)))
                quarantine(url)
            }
        }
        items.sort { $0.sequence < $1.sequence }
        keys = Set(items.map(\.key))
        nextSequence = (items.last?.sequence ?? 0) + 1
        return problems
    }

    var isEmpty: Bool { items.isEmpty }
    var count: Int { items.count }

    func contains(key: String) -> Bool { keys.contains(key) }

    /// Writes a new item unless one with the same key waits already; returns whether it did.
    @discardableResult
    mutating func append(kind: OutboxItem.Kind, key: String, now: Date, fill: (inout OutboxItem) -> Void) throws(SubsyncClientError) -> Bool {
        guard !keys.contains(key) else { return false }
        var item = OutboxItem(sequence: nextSequence, kind: kind, key: key, enqueuedAt: now)
        fill(&item)
        let url = fileURL(item)
        do {
            try DurableFile.store(try encoder.encode(item), at: url)
        } catch {
            // A failure after the rename (the folder's sync) leaves the file in place: it goes,
            // so that what is on the disk is what the app was told (its sequence is reused).
            try? FileManager.default.removeItem(at: url)
            throw .storage(path: url.path, reason: "\(error)")
        }
        nextSequence += 1
        items.append(item)
        keys.insert(key)
        return true
    }

    /// The next batch: the oldest item and the items of its kind right behind it, at most its
    /// kind's batch limit (or `limit`, when smaller). Order is kept across kinds (the service
    /// does not need it: reports and usage are sets, but it keeps what the app did in order).
    /// Items whose keys are in `skipping` are passed over (the service keeps failing on them).
    func nextBatch(limit: Int, skipping: Set<String> = []) -> [OutboxItem] {
        let candidates = skipping.isEmpty ? items[...] : ArraySlice(items.filter { !skipping.contains($0.key) })
        guard let first = candidates.first else { return [] }
        let size = min(first.batchLimit, max(1, limit))
        return Array(candidates.prefix { $0.kind == first.kind }.prefix(size))
    }

    /// Deletes the items with `keys` (the service has them, or refused them for good).
    mutating func remove(_ removed: [OutboxItem]) throws(SubsyncClientError) {
        let gone = Set(removed.map(\.key))
        for item in removed {
            let url = fileURL(item)
            do {
                try FileManager.default.removeItem(at: url)
            } catch let error as CocoaError where error.code == .fileNoSuchFile {
                continue
            } catch {
                throw .storage(path: url.path, reason: "\(error)")
            }
        }
        items.removeAll { gone.contains($0.key) }
        keys.subtract(gone)
    }

    private func fileURL(_ item: OutboxItem) -> URL {
        let sequence = String(item.sequence)
        let padded = String(repeating: "0", count: max(0, 16 - sequence.count)) + sequence
        return directory.appendingPathComponent("\(padded)-\(item.kind.rawValue).json")
    }

    private func quarantine(_ url: URL) {
        let corrupt = directory.appendingPathComponent("corrupt")
        try? FileManager.default.createDirectory(at: corrupt, withIntermediateDirectories: true)
        let target = corrupt.appendingPathComponent(url.lastPathComponent + "." + String(Int(Date().timeIntervalSince1970)))
        if (try? FileManager.default.moveItem(at: url, to: target)) == nil { try? FileManager.default.removeItem(at: url) }
    }

    static func reason(_ error: any Error) -> String {
        if let decoding = error as? DecodingError {
            switch decoding {
            case .dataCorrupted(let context): return "not valid JSON (\(context.debugDescription))"
            case .keyNotFound(let key, _): return "missing \(key.stringValue)"
            case .typeMismatch(_, let context), .valueNotFound(_, let context):
                return "bad value at \(context.codingPath.map(\.stringValue).joined(separator: "."))"
            @unknown default: return "unreadable"
            }
        }
        if let unknown = error as? UnknownVersion { return "unknown file version \(unknown.version)" }
        return "\(error)"
    }

    struct UnknownVersion: Error {
        var version: Int
    }
}
