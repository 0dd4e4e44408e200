/// Why a report was refused, naming the offending wire field so the HTTP layer can answer
/// `{"error": {"code": "invalid_report", "message": "..."}}` with something a client can fix.
public struct ReportValidationError: Error, Sendable, Equatable, Hashable, CustomStringConvertible {
    /// What is wrong with the field.
    public enum Problem: Sendable, Equatable, Hashable {
        /// An id is empty.
        case empty
        /// An id or string is longer than the allowed maximum.
        case tooLong(maximum: Int)
        /// An id contains a character outside `[A-Za-z0-9._:-]`.
        case invalidCharacters
        /// A date lies outside ``Report/earliestAcceptedDate`` ..< ``Report/latestAcceptedDate``.
        case dateOutOfRange
        /// A date lies before `purchased_at` (e.g. an expiry before the purchase).
        case beforePurchase
        /// The server-side trust part is inconsistent (e.g. an admin action on a non-admin report).
        case inconsistentTrust
    }

    /// The snake_case wire name of the field (`"transaction_id"`, `"expires_at"`, ...).
    public let field: String
    public let problem: Problem

    public init(field: String, problem: Problem) {
        self.field = field
        self.problem = problem
    }

    /// A human-readable message that starts with the field name.
    public var message: String {
        switch problem {
        case .empty: "\(field) must not be empty"
        case .tooLong(let maximum): "\(field) must be at most \(maximum) characters"
        case .invalidCharacters: "\(field) may only contain letters, digits and . _ : -"
        case .dateOutOfRange: "\(field) must be between 2000-01-01 and 2100-01-01"
        case .beforePurchase: "\(field) must not be before purchased_at"
        case .inconsistentTrust: "\(field) is only allowed on admin reports"
        }
    }

    public var description: String { message }
}
