import CLibPQ

/// The rows a statement returned, backed by libpq's `PGresult`.
///
/// `@unchecked Sendable`: libpq documents a `PGresult` as read-only once created and safe to
/// read from any thread; this class only reads it and frees it once, in `deinit`.
public final class QueryResult: @unchecked Sendable {
    private let result: OpaquePointer
    /// Number of rows returned.
    public let count: Int
    /// Column names, in order.
    public let columns: [String]
    /// Rows affected by INSERT/UPDATE/DELETE (0 when the command reports none).
    public let affectedRows: Int
    /// The command tag the server answered with, such as `INSERT 0 1` or `COMMIT`.
    public let commandTag: String

    init(taking result: OpaquePointer) {
        self.result = result
        self.count = Int(PQntuples(result))
        let columnCount = Int(PQnfields(result))
        self.columns = (0..<columnCount).map { String(cString: PQfname(result, Int32($0))) }
        self.affectedRows = Int(String(cString: PQcmdTuples(result))) ?? 0
        self.commandTag = PQcmdStatus(result).map { String(cString: $0) } ?? ""
    }

    deinit {
        PQclear(result)
    }

    /// The row at `index`.
    public subscript(index: Int) -> Row {
        precondition(index >= 0 && index < count, "row index out of range")
        return Row(result: self, index: index)
    }

    /// The first row, if any.
    public var first: Row? { count > 0 ? self[0] : nil }

    /// The position of a column by name.
    public func columnIndex(_ name: String) -> Int? {
        columns.firstIndex(of: name)
    }

    func isNull(row: Int, column: Int) -> Bool {
        PQgetisnull(result, Int32(row), Int32(column)) == 1
    }

    /// Calls `body` with the raw text bytes of one cell (valid only during the call).
    func withCell<T>(row: Int, column: Int, _ body: (UnsafeBufferPointer<UInt8>) throws -> T) rethrows -> T {
        let length = Int(PQgetlength(result, Int32(row), Int32(column)))
        guard length > 0, let start = PQgetvalue(result, Int32(row), Int32(column)) else {
            return try body(UnsafeBufferPointer(start: nil, count: 0))
        }
        return try start.withMemoryRebound(to: UInt8.self, capacity: length) { pointer in
            try body(UnsafeBufferPointer(start: pointer, count: length))
        }
    }
}

extension QueryResult: RandomAccessCollection {
    public var startIndex: Int { 0 }
    public var endIndex: Int { count }
}

/// One row of a ``QueryResult``.
public struct Row: Sendable {
    let result: QueryResult
    let index: Int

    /// Decodes the column at `column` as `T`.
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, at column: Int) throws -> T {
        guard column >= 0, column < result.columns.count else {
            throw PostgresError(.decoding, message: "column \(column) out of range (\(result.columns.count) columns)")
        }
        if result.isNull(row: index, column: column) {
            return try T.decodeNull(column: result.columns[column])
        }
        return try result.withCell(row: index, column: column) { bytes in
            do {
                return try T.decode(text: bytes)
            } catch let error as PostgresError {
                var error = error
                error.column = result.columns[column]
                error.message = "column \"\(result.columns[column])\": \(error.message)"
                throw error
            }
        }
    }

    /// Decodes the column named `name` as `T`.
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, column name: String) throws -> T {
        guard let column = result.columnIndex(name) else {
            throw PostgresError(.decoding, message: "no column named \"\(name)\" in the result")
        }
        return try decode(type, at: column)
    }

    /// Whether the column holds SQL NULL.
    public func isNull(_ column: Int) -> Bool {
        result.isNull(row: index, column: column)
    }
}
