import Foundation
import TestSupport
import Testing

/// docs/CONFIGURATION.md lists every setting exactly once: the environment variables the code
/// reads (every `"SUBSYNC_…"` or `"DATABASE_URL"` literal under Sources/) are exactly the rows
/// of its tables before `## Scripts and tests`, each once; the rows after that heading are
/// variables the scripts or tests read.
@Suite("docs/CONFIGURATION.md")
struct ConfigurationDocumentTests {
    static let root = TestPackage.root
    static var settingLiteral: Regex<(Substring, Substring)> { #/"((?:SUBSYNC_[A-Z0-9_]+)|DATABASE_URL)"/# }
    static var tableRow: Regex<(Substring, Substring)> { #/^\| `([A-Z][A-Z0-9_]*)` \|/# }

    /// Every file under `folder` (relative to the package) whose name ends with one of `suffixes`.
    static func files(_ folder: String, suffixes: [String]) -> [URL] {
        let base = root.appendingPathComponent(folder)
        guard let walker = FileManager.default.enumerator(at: base, includingPropertiesForKeys: nil) else { return [] }
        return walker.compactMap { $0 as? URL }.filter { url in suffixes.contains { url.lastPathComponent.hasSuffix($0) } || suffixes.isEmpty }
    }

    static func read(_ url: URL) -> String {
        (try? String(contentsOf: url, encoding: .utf8)) ?? ""
    }

    @Test("the settings the code reads and the document's rows are the same, each row once")
    func everySettingOnce() throws {
        var read: Set<String> = []
        for file in Self.files("Sources", suffixes: [".swift"]) {
            for match in Self.read(file).matches(of: Self.settingLiteral) { read.insert(String(match.1)) }
        }
        #expect(read.count > 50, "the code's settings were found: \(read.count)")

        let document = try String(contentsOf: Self.root.appendingPathComponent("docs/CONFIGURATION.md"), encoding: .utf8)
        let parts = document.components(separatedBy: "\n## Scripts and tests\n")
        #expect(parts.count == 2, "docs/CONFIGURATION.md has one '## Scripts and tests' section")
        func rows(_ text: String) -> [String] {
            text.split(separator: "\n").compactMap { line in line.firstMatch(of: Self.tableRow).map { String($0.1) } }
        }
        let documented = rows(parts[0])
        var seen: [String: Int] = [:]
        for name in documented { seen[name, default: 0] += 1 }
        for (name, count) in seen.sorted(by: { $0.key < $1.key }) where count > 1 {
            Issue.record("\(name) has \(count) rows in docs/CONFIGURATION.md")
        }
        for name in read.subtracting(documented).sorted() {
            Issue.record("\(name) is read by the code but has no row in docs/CONFIGURATION.md")
        }
        for name in Set(documented).subtracting(read).sorted() {
            Issue.record("\(name) has a row in docs/CONFIGURATION.md but the code does not read it (stale)")
        }

        // The scripts' and tests' own variables: each is read somewhere under scripts/ or Tests/.
        let scripted = rows(parts.count == 2 ? parts[1] : "")
        #expect(!scripted.isEmpty)
        let elsewhere = (Self.files("scripts", suffixes: []) + Self.files("Tests", suffixes: [".swift"]) + Self.files(".ci", suffixes: []))
            .map(Self.read).joined(separator: "\n")
        for name in scripted {
            #expect(elsewhere.contains(name), "\(name) is listed under 'Scripts and tests' but nothing there reads it")
            #expect(!read.contains(name), "\(name) is read by the code: its row belongs above 'Scripts and tests'")
        }
    }
}
