import CLibPQ
import Foundation

/// Owns one libpq `PGconn`, freeing it exactly once.
///
/// Every method must be called on the owning ``Connection``'s serial queue: libpq connections
/// are not thread-safe.
///
/// `@unchecked Sendable`: the handle is passed into closures that run on that queue, and only
/// there; the serial queue, not the type system, guarantees one caller at a time.
final class ConnectionHandle: @unchecked Sendable {
    private(set) var pointer: OpaquePointer?

    /// Opens a connection with `PQconnectdbParams`. `PQfinish` runs on failure too, because
    /// libpq allocates a `PGconn` even for a failed attempt.
    init(configuration: ConnectionConfiguration) throws {
        let parameters = configuration.effectiveParameters
        let connection: OpaquePointer? = withCStringArray(parameters.map(\.key)) { keywords in
            withCStringArray(parameters.map(\.value)) { values in
                PQconnectdbParams(keywords, values, 0)
            }
        }
        guard let connection else {
            throw PostgresError(.connectionFailed, message: "out of memory while connecting")
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = String(cString: PQerrorMessage(connection)).trimmingTrailingNewlines()
            PQfinish(connection)
            throw PostgresError(.connectionFailed, message: message)
        }
        self.pointer = connection
    }

    deinit {
        close()
    }

    func close() {
        if let pointer {
            PQfinish(pointer)
            self.pointer = nil
        }
    }

    var isOK: Bool {
        guard let pointer else { return false }
        return PQstatus(pointer) == CONNECTION_OK
    }

    var isIdleOutsideTransaction: Bool {
        guard let pointer else { return false }
        return PQtransactionStatus(pointer) == PQTRANS_IDLE
    }

    var errorMessage: String {
        guard let pointer else { return "connection closed" }
        return String(cString: PQerrorMessage(pointer)).trimmingTrailingNewlines()
    }

    func connectionLostError() -> PostgresError {
        PostgresError(.connectionLost, message: errorMessage)
    }

    /// Runs `PQexecParams` (or `PQexecPrepared` when `preparedName` is given) and checks the result.
    func execute(_ sql: String, binds: [PostgresValue], preparedName: String?) throws -> QueryResult {
        guard let pointer else { throw PostgresError(.closed, message: "connection is closed") }
        let count = binds.count
        var lengths = [Int32](repeating: 0, count: count)
        var formats = [Int32](repeating: 0, count: count)
        var types = [Oid](repeating: 0, count: count)
        var storage: [[CChar]?] = []
        storage.reserveCapacity(count)
        for (index, bind) in binds.enumerated() {
            switch bind {
            case .null:
                storage.append(nil)
            case .text(let text):
                if text.utf8.contains(0) {
                    throw PostgresError(.encoding, message: "parameter $\(index + 1) contains a NUL byte, which PostgreSQL text cannot hold")
                }
                storage.append(Array(text.utf8CString))
            case .bytes(let bytes):
                storage.append(bytes.map { CChar(bitPattern: $0) })
                lengths[index] = Int32(bytes.count)
                formats[index] = 1
                types[index] = 17  // bytea
            }
        }
        let result: OpaquePointer? = withPointerArray(storage) { values in
            if let preparedName {
                return PQexecPrepared(pointer, preparedName, Int32(count), values, lengths, formats, 0)
            }
            return PQexecParams(pointer, sql, Int32(count), types, values, lengths, formats, 0)
        }
        return try check(result)
    }

    /// Sends `PQprepare` for a statement with `count` untyped parameters.
    func prepare(_ sql: String, name: String, parameterCount: Int) throws {
        guard let pointer else { throw PostgresError(.closed, message: "connection is closed") }
        let result = PQprepare(pointer, name, sql, Int32(parameterCount), nil)
        _ = try check(result)
    }

    /// Runs a parameterless command such as `BEGIN`, `COMMIT` or `LISTEN "x"`.
    func executeSimple(_ sql: String) throws -> QueryResult {
        guard let pointer else { throw PostgresError(.closed, message: "connection is closed") }
        return try check(PQexec(pointer, sql))
    }

    /// Turns a `PGresult` into a ``QueryResult`` or a typed error, freeing it on error.
    private func check(_ result: OpaquePointer?) throws -> QueryResult {
        guard let result else {
            throw isOK ? PostgresError(.client, message: errorMessage) : connectionLostError()
        }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            return QueryResult(taking: result)
        default:
            let error = Self.error(from: result, connectionOK: isOK)
            PQclear(result)
            throw error
        }
    }

    static func error(from result: OpaquePointer, connectionOK: Bool) -> PostgresError {
        func field(_ code: Int32) -> String? {
            guard let value = PQresultErrorField(result, code) else { return nil }
            return String(cString: value)
        }
        let sqlState = field(Int32(UInt8(ascii: "C"))).map(SQLState.init(rawValue:))
        let message = field(Int32(UInt8(ascii: "M")))
            ?? String(cString: PQresultErrorMessage(result)).trimmingTrailingNewlines()
        let kind: PostgresError.Kind
        if !connectionOK || (sqlState?.isConnectionLoss ?? false) {
            kind = .connectionLost
        } else if sqlState != nil {
            kind = .server
        } else {
            kind = .client
        }
        return PostgresError(
            kind,
            sqlState: sqlState,
            message: message.isEmpty ? "unknown error" : message,
            detail: field(Int32(UInt8(ascii: "D"))),
            hint: field(Int32(UInt8(ascii: "H"))),
            constraint: field(Int32(UInt8(ascii: "n"))),
            table: field(Int32(UInt8(ascii: "t"))),
            column: field(Int32(UInt8(ascii: "c")))
        )
    }

    /// Quotes an identifier (channel or table name) with libpq's escaping.
    func escapeIdentifier(_ identifier: String) throws -> String {
        guard let pointer else { throw PostgresError(.closed, message: "connection is closed") }
        let length = identifier.utf8.count
        guard let escaped = PQescapeIdentifier(pointer, identifier, length) else {
            throw PostgresError(.encoding, message: errorMessage)
        }
        defer { PQfreemem(escaped) }
        return String(cString: escaped)
    }

    /// Checks, without blocking, that an idle connection is still alive.
    ///
    /// An idle connection should have nothing to read. If the server went away it has sent
    /// a FATAL message and closed the socket, which shows up as readable data here.
    func isAliveWhenIdle() -> Bool {
        guard let pointer, PQstatus(pointer) == CONNECTION_OK else { return false }
        let socket = PQsocket(pointer)
        guard socket >= 0 else { return false }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, 0)
        if ready == 0 { return true }
        if ready < 0 { return false }
        // Something arrived on an idle connection: a notice we can drop, or the server leaving.
        guard PQconsumeInput(pointer) == 1, PQstatus(pointer) == CONNECTION_OK else { return false }
        guard PQisBusy(pointer) == 0 else { return false }
        if let stray = PQgetResult(pointer) {
            PQclear(stray)
            return false
        }
        return true
    }

    /// Waits up to `timeout` seconds for a NOTIFY and returns those that arrived.
    func waitForNotifications(timeout: Double) throws -> [Notification] {
        guard let pointer else { throw PostgresError(.closed, message: "connection is closed") }
        var notifications = drainNotifications(pointer)
        if !notifications.isEmpty { return notifications }
        let socket = PQsocket(pointer)
        guard socket >= 0 else { throw connectionLostError() }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(max(0, min(timeout, 3600)) * 1000)
        let ready = poll(&descriptor, 1, milliseconds)
        if ready < 0, errno != EINTR { throw PostgresError(.connectionLost, message: "poll failed: \(errno)") }
        if ready > 0 {
            guard PQconsumeInput(pointer) == 1 else { throw connectionLostError() }
            notifications = drainNotifications(pointer)
        }
        guard PQstatus(pointer) == CONNECTION_OK else { throw connectionLostError() }
        return notifications
    }

    private func drainNotifications(_ pointer: OpaquePointer) -> [Notification] {
        var notifications: [Notification] = []
        while let notify = PQnotifies(pointer) {
            notifications.append(
                Notification(
                    channel: String(cString: notify.pointee.relname),
                    payload: String(cString: notify.pointee.extra),
                    backendPID: notify.pointee.be_pid
                )
            )
            PQfreemem(notify)
        }
        return notifications
    }

    var backendPID: Int32 {
        guard let pointer else { return 0 }
        return PQbackendPID(pointer)
    }

    var serverVersion: Int32 {
        guard let pointer else { return 0 }
        return PQserverVersion(pointer)
    }
}

/// A NOTIFY message received on a listening connection.
public struct Notification: Sendable, Hashable {
    public var channel: String
    public var payload: String
    public var backendPID: Int32
}

/// Calls `body` with C strings that live for the call, followed by a terminating NULL.
private func withCStringArray<T>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) -> T) -> T {
    withPointerArray(strings.map { Array($0.utf8CString) }, body)
}

/// Calls `body` with stable pointers to each byte array (nil stays nil), plus a trailing nil.
private func withPointerArray<T>(_ arrays: [[CChar]?], _ body: ([UnsafePointer<CChar>?]) -> T) -> T {
    // Copy into one contiguous allocation so every pointer stays valid for the whole call.
    let total = arrays.reduce(0) { $0 + ($1?.count ?? 0) }
    let buffer = UnsafeMutableBufferPointer<CChar>.allocate(capacity: max(total, 1))
    defer { buffer.deallocate() }
    var pointers: [UnsafePointer<CChar>?] = []
    pointers.reserveCapacity(arrays.count + 1)
    var offset = 0
    for array in arrays {
        guard let array else {
            pointers.append(nil)
            continue
        }
        let start = buffer.baseAddress.map { $0 + offset }
        if let start {
            array.withUnsafeBufferPointer { source in
                if let base = source.baseAddress { start.update(from: base, count: source.count) }
            }
        }
        pointers.append(start.map { UnsafePointer($0) })
        offset += array.count
    }
    pointers.append(nil)
    return body(pointers)
}
