#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Android)
import Android
#endif
import Foundation

/// Files that survive a power loss, not only a crash of the app.
///
/// `Data.write(to:options: .atomic)` writes a temporary file and renames it over the target, so
/// a crash mid-write leaves the old file or the new one; but it never asks the system to put
/// either on the disk. After a power loss (or a kernel panic, or a phone whose battery died) a
/// file that the app was told had been written can come back empty, or not at all: an outbox
/// item whose purchase the device then never reports. Here the temporary file's bytes reach
/// the disk before the rename (`fsync`; `F_FULLFSYNC` on Apple's systems, where `fsync` stops
/// at the drive's cache), and the rename itself does before `store` returns (the folder's
/// `fsync`).
///
/// Removing a file is not made durable: one that comes back after a power loss is an item the
/// service has already (reports and usage carry their ids, so it counts once), sent again.
///
/// A folder's own `fsync` is skipped where the file system refuses it (`EINVAL`, `ENOTSUP`:
/// some network and FUSE mounts), as SQLite does: the file is written and renamed, the best
/// such a file system offers.
enum DurableFile {
    /// A system call that failed, with what the system said.
    struct Failure: Error, CustomStringConvertible {
        var call: String
        var code: Int32

        var description: String { "\(call) failed: \(String(cString: strerror(code)))" }
    }

    /// Temporary files are named `.<name>.<random>.tmp`, beside their target: hidden, and not
    /// `.json`, so a folder's reader skips them; ``removeLeftovers(in:of:)`` deletes those that
    /// an interrupted write left.
    static let temporarySuffix = ".tmp"

    /// Writes `data` to `url`, replacing what is there, once it is on the disk.
    static func store(_ data: Data, at url: URL) throws {
        let directory = url.deletingLastPathComponent()
        let temporary = directory.appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString)\(temporarySuffix)")
        let descriptor = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Failure(call: "open", code: errno) }
        do {
            try writeAll(data, to: descriptor)
            try synchronize(descriptor, call: "fsync")
        } catch {
            close(descriptor)
            unlink(temporary.path)
            throw error
        }
        guard close(descriptor) == 0 else {
            let code = errno
            unlink(temporary.path)
            throw Failure(call: "close", code: code)
        }
        guard rename(temporary.path, url.path) == 0 else {
            let code = errno
            unlink(temporary.path)
            throw Failure(call: "rename", code: code)
        }
        try synchronizeDirectory(directory)
    }

    /// Deletes the temporary files that writes interrupted by a crash left in `directory`: those
    /// of the files named `targets`, or of any file when `targets` is nil (a folder the client
    /// owns alone). The storage folder may be shared with the app, whose files are left alone.
    /// `listed`: the folder's names when the caller has just listed it.
    static func removeLeftovers(in directory: URL, of targets: [String]? = nil, listed: [String]? = nil) {
        guard let names = listed ?? (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) else { return }
        let prefixes = targets.map { $0.map { ".\($0)." } }
        for name in names where name.hasPrefix(".") && name.hasSuffix(temporarySuffix) {
            if let prefixes, !prefixes.contains(where: { name.hasPrefix($0) }) { continue }
            try? FileManager.default.removeItem(at: directory.appendingPathComponent(name))
        }
    }

    private static func writeAll(_ data: Data, to descriptor: Int32) throws {
        try data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) in
            guard let base = buffer.baseAddress else { return }
            var offset = 0
            while offset < buffer.count {
                let written = write(descriptor, base + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw Failure(call: "write", code: errno)
                }
                // A regular file takes at least one byte or fails; never loop on nothing.
                guard written > 0 else { throw Failure(call: "write", code: EIO) }
                offset += written
            }
        }
    }

    private static func synchronize(_ descriptor: Int32, call: String) throws {
        #if canImport(Darwin)
        // F_FULLFSYNC also asks the drive to write out its cache; where the file system does
        // not support it, plain fsync below.
        while true {
            if fcntl(descriptor, F_FULLFSYNC) == 0 { return }
            if errno != EINTR { break }
        }
        #endif
        while fsync(descriptor) != 0 {
            if errno == EINTR { continue }
            throw Failure(call: call, code: errno)
        }
    }

    /// The folder's entries (a renamed file, a new folder) reach the disk with the folder's own
    /// `fsync`; skipped where the file system refuses to sync a folder (see the type's notes).
    private static func synchronizeDirectory(_ directory: URL) throws {
        let descriptor = open(directory.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Failure(call: "open (folder)", code: errno) }
        defer { close(descriptor) }
        do {
            try synchronize(descriptor, call: "fsync (folder)")
        } catch let failure as Failure where failure.code == EINVAL || failure.code == ENOTSUP || failure.code == EOPNOTSUPP {
            return
        }
    }

    /// Creates `directory` and the folders above it that are missing, each one's entry synced
    /// to the disk in its parent: a new outbox does not vanish with the first item put in it.
    static func createDirectory(_ directory: URL) throws {
        var missing: [URL] = []
        var cursor = directory.standardizedFileURL
        while !FileManager.default.fileExists(atPath: cursor.path) {
            missing.append(cursor)
            let parent = cursor.deletingLastPathComponent()
            guard parent.path != cursor.path else { break }
            cursor = parent
        }
        for folder in missing.reversed() {
            do {
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
            } catch let error as CocoaError where error.code == .fileWriteFileExists {
                // Made meanwhile by another client of the same app: there it is.
            }
            try synchronizeDirectory(folder.deletingLastPathComponent())
        }
    }
}
