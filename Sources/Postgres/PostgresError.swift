/// An error from the PostgreSQL layer.
///
/// `description` is safe to log: it names the kind of failure, the SQLSTATE and the server's
/// primary message, never connection passwords nor the server's `DETAIL`, which can quote row
/// values (for example the duplicated key of a unique violation). `debugDescription` adds the
/// detail and hint for local debugging.
public struct PostgresError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// What went wrong, at the level a caller decides on.
    public enum Kind: String, Sendable, Hashable {
        /// The connection could not be opened.
        case connectionFailed = "connection failed"
        /// The connection broke while in use; it has been, or must be, discarded.
        case connectionLost = "connection lost"
        /// The server answered the statement with an error; see ``PostgresError/sqlState``.
        case server = "server error"
        /// A value in a result could not be decoded as the requested Swift type.
        case decoding = "decoding failed"
        /// A parameter could not be encoded (for example text with a NUL byte).
        case encoding = "encoding failed"
        /// No pooled connection became free in time.
        case poolTimeout = "pool timeout"
        /// The pool or connection was closed.
        case closed = "closed"
        /// libpq reported something unexpected (out of memory, protocol state).
        case client = "client error"
    }

    public var kind: Kind
    /// The server's SQLSTATE, when the server sent one.
    public var sqlState: SQLState?
    /// The primary message (server's or libpq's). Never contains the password.
    public var message: String
    /// The server's DETAIL field; may contain data values, so it is not in `description`.
    public var detail: String?
    public var hint: String?
    public var constraint: String?
    public var table: String?
    public var column: String?

    public init(
        _ kind: Kind,
        sqlState: SQLState? = nil,
        message: String,
        detail: String? = nil,
        hint: String? = nil,
        constraint: String? = nil,
        table: String? = nil,
        column: String? = nil
    ) {
        self.kind = kind
        self.sqlState = sqlState
        self.message = message
        self.detail = detail
        self.hint = hint
        self.constraint = constraint
        self.table = table
        self.column = column
    }

    /// Whether the connection that produced this error must not be reused.
    public var isConnectionLoss: Bool {
        kind == .connectionLost || kind == .connectionFailed || (sqlState?.isConnectionLoss ?? false)
    }

    /// Whether a node of a distributed database (Citus) failed under the statement: the
    /// coordinator answered, but a worker node it needed broke off or could not be reached.
    /// Citus reports that as an internal error (`XX000`: "failure on connection marked as
    /// essential", "SSL SYSCALL error: EOF detected", "connection to the remote node ...");
    /// the statement may succeed once the node is back, like after a lost connection, and the
    /// connection to the coordinator stays usable.
    /// Also the two-phase commit's own failures when a node dies between the statement and the
    /// commit ("failed to prepare transaction ... on host", "could not commit transaction for
    /// shard") and the refusals to reach one ("could not connect", "cannot connect to ...").
    /// Rows a statement sends to shards go by COPY, whose breaks Citus reports as an I/O error
    /// (`58030`: "failed to COPY to shard ... on host", "failed to complete COPY on host").
    public var isRemoteNodeFailure: Bool {
        guard kind == .server else { return false }
        let text = message.lowercased()
        switch sqlState {
        case .internalError?: return Self.remoteNodeFailureFragments.contains { text.contains($0) }
        case .ioError?: return Self.shardCopyFailureFragments.contains { text.contains($0) }
        default: return false
        }
    }

    /// What Citus's messages about an unreachable or failed node contain (Citus 13,
    /// `src/backend/distributed/{connection,transaction,executor}`).
    private static let remoteNodeFailureFragments = [
        "connection", "ssl syscall", "remote node", "failed to prepare transaction",
        "could not commit transaction", "could not connect", "cannot connect to", "could not establish",
    ]

    /// What Citus's I/O errors (`58030`) about a COPY to a shard that broke off contain (Citus 13,
    /// `multi_copy.c`, `worker_shard_copy.c`); a local disk's I/O error contains none of them.
    private static let shardCopyFailureFragments = ["copy to shard", "copy to destination shard", "complete copy on"]

    /// Whether the same statement may succeed later without any change: the connection, the
    /// pool, a node of a distributed database, or contention (serialization, deadlock, lock
    /// timeout, a cancelled statement). Never counted against the data it was about.
    public var isTransient: Bool {
        if isConnectionLoss || isRemoteNodeFailure || kind == .poolTimeout || kind == .closed { return true }
        guard let sqlState else { return false }
        return sqlState.isTransient || sqlState == .lockNotAvailable || sqlState == .queryCanceled
    }

    public var description: String {
        var text = "PostgresError(\(kind.rawValue)"
        if let sqlState { text += ", SQLSTATE \(sqlState)" }
        if let constraint { text += ", constraint \(constraint)" }
        text += "): \(message)"
        return text
    }

    public var debugDescription: String {
        var text = description
        if let detail { text += "\nDETAIL: \(detail)" }
        if let hint { text += "\nHINT: \(hint)" }
        return text
    }
}
