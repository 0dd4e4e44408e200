import Foundation

#if canImport(Glibc)
import Glibc
#endif

extension LocalServer {
    /// The lock file that names the process owning this server: beside the data folder, not in
    /// it (`initdb` wants an empty folder), e.g. `.subsync/postgres.owner`.
    public var ownerLockPath: String { dataDirectory.path + ".owner" }

    /// Claims this server for the calling process, or throws
    /// ``ServerError/ownedByAnotherProcess(pid:dataDirectory:)`` naming the live process that
    /// holds it.
    ///
    /// The claim is an exclusive `flock` on ``ownerLockPath``: the kernel drops it when its
    /// holder exits in any way (`kill -9` included), so a stale claim cannot exist, and a server
    /// left running by a dead owner is adopted by the next one. The descriptor is close-on-exec,
    /// so PostgreSQL, started by this process, does not inherit the claim.
    public func claimOwnership() throws -> Ownership {
        try Ownership(path: ownerLockPath, dataDirectory: dataDirectory.path)
    }

    /// One process's claim on a local server (see ``LocalServer/claimOwnership()``): one owner
    /// object per lock descriptor, closed exactly once when the object goes.
    public final class Ownership: Sendable {
        let descriptor: Int32
        /// The lock file.
        public let path: String

        init(path: String, dataDirectory: String) throws {
            try FileManager.default.createDirectory(
                atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else {
                throw ServerError.notReachable("cannot open \(path): \(String(cString: strerror(errno)))")
            }
            guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
                let owner = Self.readOwner(descriptor)
                close(descriptor)
                throw ServerError.ownedByAnotherProcess(pid: owner, dataDirectory: dataDirectory)
            }
            let text = "\(getpid())\n"
            _ = ftruncate(descriptor, 0)
            _ = text.withCString { pwrite(descriptor, $0, strlen($0), 0) }
            self.descriptor = descriptor
            self.path = path
        }

        deinit {
            // Closing the only descriptor of the open file releases the flock.
            close(descriptor)
        }

        static func readOwner(_ descriptor: Int32) -> Int32? {
            var buffer = [UInt8](repeating: 0, count: 32)
            let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return nil }
            return Int32(String(decoding: buffer[0..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }

    /// The PID in the data folder's `postmaster.pid` (the running server's, or a dead one's
    /// until the next start), nil when there is none.
    public var postmasterPID: Int32? {
        let file = dataDirectory.appendingPathComponent("postmaster.pid").path
        guard let text = try? String(contentsOfFile: file, encoding: .utf8),
            let first = text.split(separator: "\n").first, let pid = Int32(first.trimmingCharacters(in: .whitespaces)), pid > 0
        else { return nil }
        return pid
    }

    /// Whether the server's postmaster process is alive, from ``postmasterPID``: cheap enough
    /// to ask every few seconds (no process is started).
    public var postmasterIsAlive: Bool {
        guard let pid = postmasterPID else { return false }
        return kill(pid, 0) == 0 || errno == EPERM
    }
}
