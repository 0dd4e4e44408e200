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
enum DurableFile {
    /// A system call that failed, with what the system said.
    struct Failure: Error, CustomStringConvertible {
        var call: String
        var code: Int32

        var description: String { "\(call) failed: \(String(cString: strerror(code)))" }
    }

    /// Temporary files are named `.<name>.<random>.tmp`, beside their target: hidden, and not
    /// `.json`, so a folder's reader skips them; ``removeLeftovers(in:)`` deletes those that an
    /// interrupted write left.
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

    /// Deletes the temporary files that writes interrupted by a crash left in `directory`.
    static func removeLeftovers(in directory: URL) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return }
        for name in names where name.hasPrefix(".") && name.hasSuffix(temporarySuffix) {
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
                offset += written
            }
        }
    }

    private static func synchronize(_ descriptor: Int32, call: String) throws {
        #if canImport(Darwin)
        // F_FULLFSYNC asks the drive to write its cache; file systems that cannot say so.
        if fcntl(descriptor, F_FULLFSYNC) == 0 { return }
        #endif
        while fsync(descriptor) != 0 {
            if errno == EINTR { continue }
            throw Failure(call: call, code: errno)
        }
    }

    /// The folder's entry for a renamed file reaches the disk with the folder's own `fsync`.
    private static func synchronizeDirectory(_ directory: URL) throws {
        let descriptor = open(directory.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Failure(call: "open (folder)", code: errno) }
        defer { close(descriptor) }
        try synchronize(descriptor, call: "fsync (folder)")
    }
}
