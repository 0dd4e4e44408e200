/// A SQL statement with its bind parameters.
///
/// Interpolated values become `$1`, `$2`, ... placeholders and travel separately from the SQL
/// text, so no value can change the statement:
///
/// ```swift
/// let query: PostgresQuery = "SELECT tier FROM account_states WHERE account_id = \(accountID)"
/// ```
///
/// Only ``StringInterpolation/appendInterpolation(unescaped:)`` inserts text into the SQL, and it
/// is meant for identifiers and fragments that the code itself spells.
public struct PostgresQuery: Sendable, ExpressibleByStringInterpolation, CustomStringConvertible {
    public var sql: String
    public var binds: [PostgresValue]

    public init(_ sql: String, binds: [PostgresValue] = []) {
        self.sql = sql
        self.binds = binds
    }

    public init(stringLiteral value: String) {
        self.init(value)
    }

    public init(stringInterpolation: StringInterpolation) {
        self.init(stringInterpolation.sql, binds: stringInterpolation.binds)
    }

    /// The SQL text only; bind values are left out because they may be personal data.
    public var description: String { sql }

    /// The interpolation methods are inlinable, so a value's `postgresValue` is called on its
    /// concrete type at each call site: an array parameter then gets the binding specialized for
    /// its element type (``Swift/Array/postgresValue``). Called through this generic method from
    /// another module, every array went through the unspecialized, witness-table path, about 2 %
    /// of the machine in a webhook drain (docs/PERFORMANCE.md item 38).
    public struct StringInterpolation: StringInterpolationProtocol {
        @usableFromInline var sql: String
        @usableFromInline var binds: [PostgresValue]

        public init(literalCapacity: Int, interpolationCount: Int) {
            sql = ""
            sql.reserveCapacity(literalCapacity + interpolationCount * 3)
            binds = []
            binds.reserveCapacity(interpolationCount)
        }

        @inlinable
        public mutating func appendLiteral(_ literal: String) {
            sql += literal
        }

        /// Binds a value as the next `$n` parameter.
        @inlinable
        public mutating func appendInterpolation(_ value: some PostgresEncodable) {
            binds.append(value.postgresValue)
            sql += "$\(binds.count)"
        }

        /// Binds `nil` as SQL NULL.
        @inlinable
        public mutating func appendInterpolation<Value: PostgresEncodable>(_ value: Value?) {
            binds.append(value?.postgresValue ?? .null)
            sql += "$\(binds.count)"
        }

        /// Inserts code-authored SQL text verbatim. Never pass input through this.
        public mutating func appendInterpolation(unescaped fragment: String) {
            sql += fragment
        }
    }
}
