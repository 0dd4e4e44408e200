import Postgres

/// JSON as text, for the `::text[]` arrays that batched writes cast to `json` row by row.
enum JSONText {
    static func of(_ value: some Encodable) throws -> String {
        try PostgresJSONEncoder.string(value)
    }
}
