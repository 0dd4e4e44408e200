/// A PostgreSQL SQLSTATE error code, such as `23505` (unique violation).
///
/// Codes are compared by value; the named constants cover the ones this code base reacts to.
/// See https://www.postgresql.org/docs/current/errcodes-appendix.html
public struct SQLState: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// The two-character class, such as `23` for integrity constraint violations.
    public var errorClass: Substring { rawValue.prefix(2) }

    public var description: String { rawValue }

    /// Whether the error says the connection itself is gone (class 08, or an administrator
    /// or crash shutdown), so the connection must be discarded rather than reused.
    public var isConnectionLoss: Bool {
        errorClass == "08" || self == .adminShutdown || self == .crashShutdown || self == .cannotConnectNow
    }

    /// Whether retrying the whole transaction may succeed (serialization failure, deadlock).
    public var isTransient: Bool {
        self == .serializationFailure || self == .deadlockDetected || isConnectionLoss
    }

    public static let uniqueViolation = SQLState(rawValue: "23505")
    public static let foreignKeyViolation = SQLState(rawValue: "23503")
    public static let notNullViolation = SQLState(rawValue: "23502")
    public static let checkViolation = SQLState(rawValue: "23514")
    public static let serializationFailure = SQLState(rawValue: "40001")
    public static let deadlockDetected = SQLState(rawValue: "40P01")
    public static let internalError = SQLState(rawValue: "XX000")
    public static let ioError = SQLState(rawValue: "58030")
    public static let syntaxError = SQLState(rawValue: "42601")
    public static let undefinedTable = SQLState(rawValue: "42P01")
    public static let undefinedColumn = SQLState(rawValue: "42703")
    public static let undefinedFunction = SQLState(rawValue: "42883")
    public static let invalidTextRepresentation = SQLState(rawValue: "22P02")
    public static let numericValueOutOfRange = SQLState(rawValue: "22003")
    public static let queryCanceled = SQLState(rawValue: "57014")
    public static let adminShutdown = SQLState(rawValue: "57P01")
    public static let crashShutdown = SQLState(rawValue: "57P02")
    public static let cannotConnectNow = SQLState(rawValue: "57P03")
    public static let inFailedSQLTransaction = SQLState(rawValue: "25P02")
    public static let lockNotAvailable = SQLState(rawValue: "55P03")
    public static let connectionFailure = SQLState(rawValue: "08006")
}
