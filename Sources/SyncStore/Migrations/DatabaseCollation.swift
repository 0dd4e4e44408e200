import Postgres

/// How the database compares text. Every per-account table is keyed by `account_id` and most by
/// other text ids too (report, transaction, device, meter), so every index probe, insert and
/// sort compares them. Under the `C` (or `POSIX`) collation PostgreSQL compares the bytes
/// directly; under any other libc or ICU collation, even `C.UTF-8`, each comparison copies both
/// strings and goes through the locale (docs/PERFORMANCE.md, "In the code"). Nothing in subsync
/// needs a language's order for its ids, so the clusters it creates use `C`, and `serve` says so
/// when an operator's database does not.
public enum DatabaseCollation {
    /// The database's default collation when it does not compare bytewise: the libc locale's
    /// name, or `ICU <locale>` for a database with the ICU provider; `nil` for `C` and `POSIX`
    /// and for PostgreSQL 17's builtin provider (which orders by code point through `memcmp`).
    public static func nonBytewise(on connection: Connection) async throws -> String? {
        // The row as JSON, so that the provider's columns are read where the server has them:
        // `datlocprovider` and `daticulocale` since PostgreSQL 15, `daticulocale` renamed
        // `datlocale` in 17.
        let rows = try await connection.query(
            """
            SELECT datcollate::text, j ->> 'datlocprovider', COALESCE(j ->> 'datlocale', j ->> 'daticulocale')
            FROM pg_database d CROSS JOIN LATERAL to_jsonb(d) AS j
            WHERE datname = current_database()
            """
        )
        guard let row = rows.first else { return nil }
        return describe(
            collation: try row.decode(String.self, at: 0),
            provider: try row.decode(String?.self, at: 1),
            locale: try row.decode(String?.self, at: 2))
    }

    /// See ``nonBytewise(on:)``.
    public static func nonBytewise(_ pool: ConnectionPool) async throws -> String? {
        try await pool.withConnection { try await nonBytewise(on: $0) }
    }

    /// The answer of ``nonBytewise(on:)`` for a database's `datcollate`, `datlocprovider`
    /// (`c` libc, `i` ICU, `b` builtin; `nil` before PostgreSQL 15) and provider locale.
    static func describe(collation: String, provider: String?, locale: String?) -> String? {
        switch provider {
        case "i": return "ICU " + (locale ?? "")
        case "b": return nil
        default: return collation == "C" || collation == "POSIX" ? nil : collation
        }
    }
}
