import Foundation

/// One schema migration: a numbered SQL file from `sql/`.
public struct Migration: Sendable, Hashable {
    /// The number in the file name (`0001_initial.sql` → 1).
    public var version: Int
    /// The file name without `.sql`.
    public var name: String
    /// The file's text, run as one script inside one transaction.
    public var sql: String

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }

    /// The generated reading copy of the whole schema beside the migrations (`scripts/schema`),
    /// which is not a migration.
    public static let schemaFileName = "schema.sql"

    /// Loads `NNNN_name.sql` files from a folder, in version order (``schemaFileName`` aside).
    ///
    /// - Throws: ``MigrationError`` for a badly named file or two files with one number.
    public static func load(from directory: URL) throws -> [Migration] {
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            .filter { $0.hasSuffix(".sql") && $0 != schemaFileName }
            .sorted()
        var migrations: [Migration] = []
        for file in files {
            let name = String(file.dropLast(4))
            guard let prefix = name.split(separator: "_").first, prefix.count == 4, let version = Int(prefix) else {
                throw MigrationError.badFileName(file)
            }
            if let existing = migrations.first(where: { $0.version == version }) {
                throw MigrationError.duplicateVersion(version, existing.name, name)
            }
            let sql = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            migrations.append(Migration(version: version, name: name, sql: sql))
        }
        return migrations
    }
}

/// Why migrating stopped.
public enum MigrationError: Error, CustomStringConvertible, Equatable {
    case badFileName(String)
    case duplicateVersion(Int, String, String)
    /// An applied migration's file has changed since it ran; the schema no longer matches it.
    case checksumMismatch(version: Int, name: String)
    /// A migration failed; nothing of it was applied.
    case failed(version: Int, name: String, message: String)

    public var description: String {
        switch self {
        case .badFileName(let file):
            "migration file \(file) must be named NNNN_description.sql"
        case .duplicateVersion(let version, let first, let second):
            "migrations \(first) and \(second) share version \(version)"
        case .checksumMismatch(let version, let name):
            "migration \(name) (version \(version)) was changed after it was applied; restore the original file and add a new migration instead"
        case .failed(let version, let name, let message):
            "migration \(name) (version \(version)) failed and was rolled back: \(message)"
        }
    }
}
