import Foundation
import SyncStore

/// The embedded development mode's credentials: made once, kept in the data folder (mode 0600)
/// and read back on every start, so a first run works without configuring anything and a
/// restart does not invalidate what the developer pasted. Never used with a `DATABASE_URL`.
///
/// | File | Used as | Made from |
/// |---|---|---|
/// | `<data>/admin-key` | `SUBSYNC_ADMIN_KEY` when unset | 32 random bytes, base64url |
/// | `<data>/token-secret` | `SUBSYNC_TOKEN_SECRET` when unset | 48 random bytes, base64url |
/// | `<data>/secret-key` | `SUBSYNC_SECRET_KEYS` when unset (webhook secrets at rest) | `SecretSealer.generateKey()` |
struct DevelopmentCredentials {
    let dataDirectory: URL

    /// The admin key (generated if the file does not exist yet).
    func adminKey() throws -> (value: String, file: URL) {
        try value(named: "admin-key") { Self.randomText(bytes: 32) }
    }

    /// The HS256 secret of device tokens.
    func tokenSecret() throws -> (value: String, file: URL) {
        try value(named: "token-secret") { Self.randomText(bytes: 48) }
    }

    /// The key that seals webhook secrets at rest.
    func secretKey() throws -> String {
        try value(named: "secret-key") { SecretSealer.generateKey() }.value
    }

    /// The content of `<data>/<name>`, written first by `make` if the file does not exist. The
    /// file is created with `O_EXCL` and mode 0600, so it is never readable by others, not even
    /// for a moment, and two processes starting at once agree on one value.
    func value(named name: String, make: () -> String) throws -> (value: String, file: URL) {
        let file = dataDirectory.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: dataDirectory, withIntermediateDirectories: true)
        let descriptor = open(file.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if descriptor >= 0 {
            let text = make() + "\n"
            let written = text.withCString { write(descriptor, $0, strlen($0)) }
            close(descriptor)
            guard written == text.utf8.count else {
                unlink(file.path)
                throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: file.path])
            }
        } else if errno != EEXIST {
            throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: file.path])
        }
        let value = try String(contentsOf: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !value.isEmpty else {
            throw CocoaError(.fileReadCorruptFile, userInfo: [NSFilePathErrorKey: file.path])
        }
        return (value, file)
    }

    /// `bytes` bytes from the system's CSPRNG, base64url without padding.
    static func randomText(bytes: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        let data = Data((0..<bytes).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
        return data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
