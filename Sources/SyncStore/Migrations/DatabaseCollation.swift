import Postgres

/// How the database compares text. Every per-account table is keyed by `account_id` and most by
/// other text ids too (report, transaction, device, meter), so every index probe, insert and
/// sort compares them. Under the `C` (or `POSIX`) collation PostgreSQL compares the bytes
/// directly; under any other, even `C.UTF-8`, each comparison copies both strings and goes
/// through the locale: about 4 % of a resolution drain's CPU here, and a drain about 7 % longer
/// (docs/PERFORMANCE.md item 53). Nothing in subsync needs a language's order for its ids, so
/// the databases it creates use `C`, and `serve` says so when an operator's does not.
public enum DatabaseCollation {
    /// The database's collation when it is not a bytewise one (`C`, `POSIX`): the libc locale's
    /// name, or `ICU <locale>` for a database with the ICU provider (PostgreSQL 15 and later).
    public static func nonBytewise(on connection: Connection) async throws -> String? {
        // Read through to_jsonb so that servers before 15 (no ICU provider columns) answer too.
        let rows = try await connection.preparedQuery(
            """
            SELECT datcollate::text, to_jsonb(d) ->> 'datlocprovider', to_jsonb(d) ->> 'daticulocale'
            FROM pg_database d WHERE datname = current_database()
            """
        )
        return try describe(
            collation: rows[0].decode(String.self, at: 0),
            provider: rows[0].decode(String?.self, at: 1),
            icuLocale: rows[0].decode(String?.self, at: 2))
    }

    /// See ``nonBytewise(on:)``.
    public static func nonBytewise(_ pool: ConnectionPool) async throws -> String? {
        try await pool.withConnection { try await nonBytewise(on: $0) }
    }

    static func describe(collation: String, provider: String?, icuLocale: String?) -> String? {
        if provider == "i" { return "ICU \(icuLocale ?? "")" }
        return collation == "C" || collation == "POSIX" ? nil : collation
    }
}
