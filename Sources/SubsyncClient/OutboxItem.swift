import Foundation

/// One thing the client must tell the service, kept on disk until the service has it.
struct OutboxItem: Sendable, Codable, Hashable {
    enum Kind: String, Sendable, Codable {
        /// A report for `POST /sync` (batched, at most 100 a request).
        case report
        /// A usage entry for `POST /usage` (batched, at most 500 a request).
        case usage
        /// `POST /usage/holds/{id}/settle`, one a request.
        case settle
        /// `DELETE /usage/holds/{id}`, one a request.
        case release
    }

    /// The file format's version.
    var version = 1
    /// Enqueue order (the file name starts with it).
    var sequence: Int64
    var kind: Kind
    /// Identity for deduplication: a report id, a usage id, a hold operation.
    var key: String
    var enqueuedAt: Date
    var report: WireReport?
    var usage: WireUsage?
    var holdID: String?
    var settleUnits: Int?
    var settleAt: Date?

    enum CodingKeys: String, CodingKey {
        case version, sequence, kind, key, report, usage
        case enqueuedAt = "enqueued_at"
        case holdID = "hold_id"
        case settleUnits = "settle_units"
        case settleAt = "settle_at"
    }

    /// How many items of this kind may go in one request.
    var batchLimit: Int {
        switch kind {
        case .report: 100
        case .usage: 500
        case .settle, .release: 1
        }
    }
}
