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
    /// its element type (``Swift/Array/postgresValue``), not the unspecialized, witness-table path
    /// a generic call from another module takes (docs/PERFORMANCE.md, *In the code*).
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

        /// Binds a value as the next parameter cast to `type` (`$n::type`), or, when
        /// `opaqueToPlanner`, behind a one-row subquery, `(SELECT $n::type)::type`: the same
        /// value, which a custom plan can no longer read. For a key array that a statement
        /// compares with `= ANY(...)`: a custom plan estimates the selectivity of each of a
        /// constant array's elements, milliseconds for hundreds of keys, where it takes an
        /// opaque array for ten; and it is still planned at every call, with the table's size at
        /// that moment (docs/PERFORMANCE.md, *In the code*). Not for a distributed table on
        /// Citus, whose planner routes a statement to its shards by reading the keys.
        @inlinable
        public mutating func appendInterpolation(_ value: some PostgresEncodable, cast type: StaticString, opaqueToPlanner: Bool) {
            binds.append(value.postgresValue)
            sql += opaqueToPlanner ? "(SELECT $\(binds.count)::\(type))::\(type)" : "$\(binds.count)::\(type)"
        }

        /// With a value, `condition` with its `?` made the value's parameter (`$n`); without,
        /// nothing. For a condition only one kind of database needs: a key list that lets Citus
        /// send a statement to one shard, where one PostgreSQL's planner must not see it.
        @inlinable
        public mutating func appendInterpolation<Value: PostgresEncodable>(_ value: Value?, condition: StaticString) {
            guard let value else { return }
            binds.append(value.postgresValue)
            for character in "\(condition)" {
                if character == "?" { sql += "$\(binds.count)" } else { sql.append(character) }
            }
        }

        /// Inserts code-authored SQL text verbatim. Never pass input through this.
        public mutating func appendInterpolation(unescaped fragment: String) {
            sql += fragment
        }
    }
}
