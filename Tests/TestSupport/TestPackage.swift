import Foundation

/// Where the package's own files are, for tests that read fixtures, start the doubles in
/// Tests/Doubles/ or run the helpers in scripts/.
public enum TestPackage {
    /// The package's root folder (this file is Tests/TestSupport/TestPackage.swift).
    public static let root: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// A file or folder of the package, by its path from the root.
    public static func file(_ relativePath: String) -> URL {
        root.appendingPathComponent(relativePath)
    }

    /// The `subsync` binary the tests start as a process: the debug build of this package
    /// (`swift build --build-tests` makes it with the tests).
    public static var subsyncBinary: URL { file(".build/debug/subsync") }

    /// A file under Tests/Fixtures (third-party test material kept in the repository, each folder
    /// with its licence and source).
    public static func fixture(_ relativePath: String) -> URL {
        file("Tests/Fixtures/" + relativePath)
    }

    /// A test double under Tests/Doubles (the servers and clients the tests start as processes:
    /// the webhook receiver, the App Store Server API double, ...), by its file name.
    public static func double(_ name: String) -> URL {
        file("Tests/Doubles/" + name)
    }

    /// The project's Python, `.venv/bin/python3`, with the pinned test tools (standardwebhooks,
    /// PyJWT, PyYAML, ...). `scripts/test` makes it; so does `scripts/setup --test` before a
    /// plain `swift test`. The system's Python is never used: it lacks those packages, and Debian
    /// forbids installing them into it.
    public static func python() throws -> String {
        let path = file(".venv/bin/python3").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw TestSetupError("the test tools are not installed (\(path) is missing): run scripts/setup --test once, or the tests with scripts/test")
        }
        return path
    }
}
