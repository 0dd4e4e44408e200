import CLibPQ
import Foundation
import Logging

/// Owns one libpq `PGconn`, freeing it exactly once.
///
/// Every method must be called on the owning ``Connection``'s serial queue: libpq connections
/// are not thread-safe.
///
/// `@unchecked Sendable`: the handle is passed into closures that run on that queue, and only
/// there; the serial queue, not the type system, guarantees one caller at a time.
final class ConnectionHandle: @unchecked Sendable {
    private(set) var pointer: OpaquePointer?
    /// Set when the server announced a FATAL error outside of any statement (an administrator
    /// terminated the backend, the server is shutting down): the connection is as good as
    /// closed, even while libpq has not yet read the end of the socket.
    private var serverSaidFatal = false
    private let logger: Logger
    /// See ``ConnectionConfiguration/answerTimeout``.
    private let answerTimeout: Double?

    /// Opens a connection with `PQconnectdbParams`. `PQfinish` runs on failure too, because
    /// libpq allocates a `PGconn` even for a failed attempt.
    init(configuration: ConnectionConfiguration, logger: Logger = Logger(label: "subsync.postgres")) throws {
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
        self.logger = logger
        self.answerTimeout = configuration.answerTimeout
        // Notices (and errors the server sends while no statement runs) go to our logger
        // instead of libpq's default, which prints to stderr. libpq calls the receiver only
        // from inside calls made on this connection's queue. The context is unretained: the
        // receiver is uninstalled with the PGconn by `close()`, which runs before `self` is freed.
        PQsetNoticeReceiver(
            connection,
            { context, result in
                guard let context, let result else { return }
                Unmanaged<ConnectionHandle>.fromOpaque(context).takeUnretainedValue().receivedNotice(result)
            },
            Unmanaged.passUnretained(self).toOpaque()
        )
    }

    private func receivedNotice(_ result: OpaquePointer) {
        func field(_ code: UInt8) -> String? {
            PQresultErrorField(result, Int32(code)).map { String(cString: $0) }
        }
        let severity = field(UInt8(ascii: "V")) ?? field(UInt8(ascii: "S")) ?? "NOTICE"
        // The primary message only: DETAIL can quote row values.
        let message = field(UInt8(ascii: "M")) ?? ""
        var metadata: Logger.Metadata = ["severity": "\(severity)", "backend_pid": "\(backendPID)"]
        if let code = field(UInt8(ascii: "C")) { metadata["sqlstate"] = "\(code)" }
        switch severity {
        case "FATAL", "PANIC":
            serverSaidFatal = true
            logger.info("PostgreSQL closed the connection: \(message)", metadata: metadata)
        case "WARNING":
            logger.warning("PostgreSQL: \(message)", metadata: metadata)
        default:
            logger.debug("PostgreSQL: \(message)", metadata: metadata)
        }
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
        guard let pointer, !serverSaidFatal else { return false }
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
        let message = errorMessage
        return PostgresError(.connectionLost, message: message.isEmpty ? "the server closed the connection" : message)
    }

    /// The connection, or the error to throw: `.closed` after `close()`, `.connectionLost`
    /// once the server has said it is closing the connection.
    private func openPointer() throws -> OpaquePointer {
        guard let pointer else { throw PostgresError(.closed, message: "connection is closed") }
        guard !serverSaidFatal else { throw connectionLostError() }
        return pointer
    }

    /// Runs `PQexecParams` (or `PQexecPrepared` when `preparedName` is given) and checks the result.
    func execute(_ sql: String, binds: [PostgresValue], preparedName: String?) throws -> QueryResult {
        let pointer = try openPointer()
        let sent: Int32 = try withParameters(binds) { count, types, values, lengths, formats in
            if let preparedName {
                return PQsendQueryPrepared(pointer, preparedName, count, values, lengths, formats, 0)
            }
            return PQsendQueryParams(pointer, sql, count, types, values, lengths, formats, 0)
        }
        return try check(sent == 1 ? try answer(pointer, timeout: answerTimeout) : nil)
    }

    /// Prepares a statement (`PQsendPrepare`) with the parameter types `binds` declare: a binary
    /// value's type (`bytea`, an array type), 0 for text and NULL, whose type the server infers
    /// from the statement. A prepared statement keeps those types, so the caller prepares a
    /// statement again for binds that declare other types (``PostgresValue/declaredType``).
    func prepare(_ sql: String, name: String, binds: [PostgresValue]) throws {
        let pointer = try openPointer()
        let types = binds.map { Oid($0.declaredType) }
        let sent = PQsendPrepare(pointer, name, sql, Int32(binds.count), types)
        _ = try check(sent == 1 ? try answer(pointer, timeout: answerTimeout) : nil)
    }

    /// Runs a parameterless command such as `BEGIN`, `COMMIT` or `LISTEN "x"`, or with
    /// `waitForever` a script of several (a migration), which may take as long as it takes.
    func executeSimple(_ sql: String, waitForever: Bool = false) throws -> QueryResult {
        let pointer = try openPointer()
        let sent = PQsendQuery(pointer, sql)
        return try check(sent == 1 ? try answer(pointer, timeout: waitForever ? nil : answerTimeout) : nil)
    }

    /// Waits for the results of what was just sent and returns the one `PQexec` would: the
    /// first error, or else the last result. While libpq needs more input it polls the socket;
    /// when the server says nothing for `timeout` seconds the connection is closed and
    /// `.connectionLost` thrown (the statement's transaction, if the server ever wakes, rolls
    /// back when it sees the connection gone).
    private func answer(_ pointer: OpaquePointer, timeout: Double?) throws -> OpaquePointer? {
        var kept: OpaquePointer?
        let milliseconds = timeout.map { Int32(max(1, min($0, 86_400)) * 1000) } ?? -1
        while true {
            while PQisBusy(pointer) == 1 {
                var descriptor = pollfd(fd: PQsocket(pointer), events: Int16(POLLIN), revents: 0)
                let ready = poll(&descriptor, 1, milliseconds)
                if ready < 0, errno == EINTR { continue }
                if ready == 0 {
                    if let kept { PQclear(kept) }
                    close()
                    let seconds = timeout.map { String(format: "%g", $0) } ?? "?"
                    throw PostgresError(.connectionLost, message: "the server did not answer within \(seconds) s; the connection was closed")
                }
                // On failure libpq has recorded the error: the next PQgetResult returns it.
                if PQconsumeInput(pointer) == 0 { break }
            }
            guard let result = PQgetResult(pointer) else { return kept }
            if let current = kept, PQresultStatus(current) == PGRES_FATAL_ERROR {
                PQclear(result)
            } else {
                if let current = kept { PQclear(current) }
                kept = result
            }
        }
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
        let pointer = try openPointer()
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
    /// a FATAL message and closed the socket, which shows up as readable data here. The message
    /// and the end of the stream can take two reads to see, so this reads until nothing is left.
    func isAliveWhenIdle() -> Bool {
        guard let pointer, isOK else { return false }
        let socket = PQsocket(pointer)
        guard socket >= 0 else { return false }
        for _ in 0..<8 {
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, 0)
            if ready == 0 { break }
            if ready < 0 {
                if errno == EINTR { continue }
                return false
            }
            if descriptor.revents & Int16(POLLERR | POLLNVAL) != 0 { return false }
            // Something arrived on an idle connection: a notice we can drop, or the server leaving.
            guard PQconsumeInput(pointer) == 1, isOK else { return false }
        }
        guard PQisBusy(pointer) == 0 else { return false }
        if let stray = PQgetResult(pointer) {
            PQclear(stray)
            return false
        }
        return isOK
    }

    /// Waits up to `timeout` seconds for a NOTIFY and returns those that arrived.
    func waitForNotifications(timeout: Double) throws -> [PostgresNotification] {
        let pointer = try openPointer()
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
        guard isOK else { throw connectionLostError() }
        return notifications
    }

    private func drainNotifications(_ pointer: OpaquePointer) -> [PostgresNotification] {
        var notifications: [PostgresNotification] = []
        while let notify = PQnotifies(pointer) {
            notifications.append(
                PostgresNotification(
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
public struct PostgresNotification: Sendable, Hashable {
    public var channel: String
    public var payload: String
    public var backendPID: Int32
}

/// Calls `body` with libpq's parameter arrays for `binds` (count, types, values, lengths,
/// formats): text as NUL-terminated UTF-8 in text format with an unspecified type, bytes as
/// `bytea` and arrays in binary format with their array type. Every value is copied once, into
/// one allocation that lives for the call. Text holding a NUL byte, which PostgreSQL's `text`
/// cannot, throws ``PostgresError/Kind/encoding`` before anything is sent.
private func withParameters<T>(
    _ binds: [PostgresValue],
    _ body: (Int32, [Oid], [UnsafePointer<CChar>?], [Int32], [Int32]) -> T
) throws -> T {
    let count = binds.count
    var lengths = [Int32](repeating: 0, count: count)
    var formats = [Int32](repeating: 0, count: count)
    var types = [Oid](repeating: 0, count: count)
    var total = 0
    for (index, bind) in binds.enumerated() {
        switch bind {
        case .null:
            break
        case .text(let text):
            total += text.utf8.count + 1
        case .bytes(let bytes), .binaryArray(_, let bytes):
            total += bytes.count
            lengths[index] = Int32(bytes.count)
            formats[index] = 1
            types[index] = bind.declaredType
        }
    }
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(total, 1), alignment: 1)
    defer { buffer.deallocate() }
    var values: [UnsafePointer<CChar>?] = []
    values.reserveCapacity(count)
    var offset = 0
    /// Copies `source` to the buffer at `offset` and returns where it starts.
    func place(_ source: UnsafeRawBufferPointer, terminated: Bool) -> UnsafePointer<CChar>? {
        guard let base = buffer.baseAddress else { return nil }
        let start = base + offset
        if let from = source.baseAddress, source.count > 0 { start.copyMemory(from: from, byteCount: source.count) }
        offset += source.count
        if terminated {
            start.storeBytes(of: 0, toByteOffset: source.count, as: UInt8.self)
            offset += 1
        }
        return UnsafePointer(start.assumingMemoryBound(to: CChar.self))
    }
    for (index, bind) in binds.enumerated() {
        switch bind {
        case .null:
            values.append(nil)
        case .text(var text):
            let placed = text.withUTF8 { utf8 -> UnsafePointer<CChar>?? in
                if let base = utf8.baseAddress, memchr(base, 0, utf8.count) != nil { return .none }
                return .some(place(UnsafeRawBufferPointer(utf8), terminated: true))
            }
            guard let placed else {
                throw PostgresError(.encoding, message: "parameter $\(index + 1) contains a NUL byte, which PostgreSQL text cannot hold")
            }
            values.append(placed)
        case .bytes(let bytes), .binaryArray(_, let bytes):
            values.append(bytes.withUnsafeBytes { place($0, terminated: false) })
        }
    }
    return body(Int32(count), types, values, lengths, formats)
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
