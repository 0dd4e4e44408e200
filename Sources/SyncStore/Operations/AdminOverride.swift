import Foundation
import Logging
import Postgres
import SyncCore

/// `subsync revoke` / `unrevoke`: the operator's override of a transaction's revocation
/// (docs/RESOLUTION.md, "Per transaction: the join").
///
/// The command is recorded as a report like any other (`source = 'admin'`, with its action, its
/// time as `signed_date`, and who and why in `admin_actor` / `admin_reason`), so it joins into
/// the transaction's aggregate like every report does, reconciliation recomputes it, and the
/// history says who did what. Its descriptive fields are copied from the transaction's current
/// aggregate (an admin report never becomes the representative, but it must not look like
/// another product either). The report is joined and the account resolved at once, in the same
/// transaction, with `origin = 'admin'`, so events and deliveries are written with it.
public struct AdminOverride: Sendable {
    let pool: ConnectionPool
    let engine: ResolutionEngine
    let clock: any ServiceClock

    public init(
        pool: ConnectionPool,
        catalogue: Catalogue,
        clock: any ServiceClock = SystemClock(),
        logger: Logger = Logger(label: "subsync.admin")
    ) {
        self.pool = pool
        self.clock = clock
        self.engine = ResolutionEngine(pool: pool, catalogue: catalogue, clock: clock, logger: logger)
    }

    /// Why an override could not be applied.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// No transaction with this id (in this account, when one was given).
        case notFound(transactionID: String, accountID: String?)
        /// Several accounts have a transaction with this id; the operator must name one.
        case ambiguous(transactionID: String, accounts: [String])

        public var description: String {
            switch self {
            case .notFound(let transactionID, nil):
                "no transaction \(transactionID)"
            case .notFound(let transactionID, .some(let accountID)):
                "account \(accountID) has no transaction \(transactionID)"
            case .ambiguous(let transactionID, let accounts):
                "transaction \(transactionID) exists in several accounts (\(accounts.joined(separator: ", "))): pass --account"
            }
        }
    }

    /// What an override did.
    public struct Result: Sendable, Codable, Equatable {
        public var accountID: String
        public var transactionID: String
        public var action: AdminAction
        /// False when there was nothing to change (already revoked by an operator, or not
        /// revoked): nothing was written.
        public var recorded: Bool
        /// The admin report's id, when one was recorded.
        public var reportID: String?
        /// Whether the transaction is revoked afterwards.
        public var revoked: Bool
        public var eventsWritten: Int
        public var actor: String
        public var reason: String?
        public var at: Date

        enum CodingKeys: String, CodingKey {
            case accountID = "account_id"
            case transactionID = "transaction_id"
            case action, recorded
            case reportID = "report_id"
            case revoked
            case eventsWritten = "events_written"
            case actor, reason, at
        }
    }

    /// Records `action` on `transactionID` (in `accountID`, or the one account that has it) and
    /// resolves the account. Revoking a transaction an operator's revocation already holds, or
    /// unrevoking one that is not revoked, records nothing: a pre-emptive unrevoke would otherwise
    /// silently cancel a refund that a device reports later with an earlier `revoked_at`. A
    /// transaction only the store revoked is revoked again as the operator's decision, which the
    /// store's refund reversal does not lift.
    public func apply(
        _ action: AdminAction, transactionID: String, accountID: String?, actor: String, reason: String?
    ) async throws -> Result {
        let accountID = try await owner(of: transactionID, accountID: accountID)
        return try await pool.withTransaction { connection in
            // The workers' lock on the account: the aggregate read below cannot change under us.
            try await connection.preparedQuery("SELECT 1 FROM account_states WHERE account_id = \(accountID) FOR UPDATE")
            let rows = try await connection.preparedQuery(
                "SELECT aggregate FROM transactions WHERE account_id = \(accountID) AND transaction_id = \(transactionID)"
            )
            guard let row = rows.first else { throw Failure.notFound(transactionID: transactionID, accountID: accountID) }
            let aggregate = try row.decode(JSONColumn<TransactionAggregate>.self, at: 0).value
            // Dated by the database's clock, not the host's that runs the command (hosts disagree),
            // and after the decisions it acts on (docs/RESOLUTION.md, "Revocation: the store's and
            // the operator's"): a revoke after every operator decision, an unrevoke also after the
            // store's revocation, but an unrevoke never more than `dateTolerance` past the
            // database's clock, so that a date from a clock that ran ahead (or a device's made-up
            // one) cannot carry the unrevoke past refunds that come later.
            let now = try await DatabaseClock.now(on: connection)
            var acted = [aggregate.operatorRevocation?.revokedAt, aggregate.operatorReinstatedAt]
            if action == .unrevoke { acted.append(aggregate.storeRevocation?.revokedAt) }
            let bound = action == .revoke ? Date.distantFuture : now.addingTimeInterval(Self.dateTolerance)
            var at = now
            if let latest = acted.compactMap({ $0 }).filter({ $0 <= bound }).max(), latest >= at { at = latest.addingTimeInterval(0.001) }
            var result = Result(
                accountID: accountID, transactionID: transactionID, action: action, recorded: false, reportID: nil,
                revoked: aggregate.isRevoked, eventsWritten: 0, actor: actor, reason: reason, at: at)
            switch action {
            case .revoke: guard !aggregate.isRevokedByOperator else { return result }
            case .unrevoke: guard aggregate.isRevoked else { return result }
            }

            let report = Report(
                reportID: ReportNamespace.admin + UUID().uuidString.lowercased(), deviceID: "admin", observedAt: at,
                productID: aggregate.productID, originalTransactionID: aggregate.originalTransactionID,
                transactionID: transactionID, purchasedAt: aggregate.purchasedAt, expiresAt: aggregate.expiresAt,
                gracePeriodExpiresAt: aggregate.gracePeriodExpiresAt,
                // An unrevoke names the store revocation it lifts (the store's own word, whatever an
                // earlier unrevoke did), or the purchase time when there is none: a refund made
                // before the unrevoke but reported after it still counts (docs/RESOLUTION.md).
                revokedAt: action == .unrevoke ? (aggregate.storeSaysRevoked ? aggregate.storeRevocation?.revokedAt : nil) ?? aggregate.purchasedAt : nil,
                revocationReason: action == .revoke ? .other : nil,
                isUpgraded: aggregate.isUpgraded, willAutoRenew: aggregate.willAutoRenew,
                inBillingRetry: aggregate.inBillingRetry, environment: aggregate.environment,
                trust: .admin(action, at: at))
            _ = try await ReportInbox(pool: pool).insert(accountID: accountID, reports: [report], on: connection)
            // Joined right here, so it is resolved already; no worker will claim it.
            try await connection.preparedQuery(
                """
                UPDATE reports SET admin_actor = \(actor), admin_reason = \(reason), status = 'resolved',
                    resolved_at = now(), attempts = 1
                WHERE account_id = \(accountID) AND report_id = \(report.reportID)
                """
            )
            let outcome = try await engine.resolve(
                accounts: [accountID], newReports: [accountID: [report]], origin: .admin, on: connection)
            var after = aggregate
            after.join(report)
            result.recorded = true
            result.reportID = report.reportID
            result.revoked = after.isRevoked
            result.eventsWritten = outcome.eventsWritten
            return result
        }
    }

    /// How far past the database's clock an unrevoke may be dated to come after what it lifts.
    static let dateTolerance: TimeInterval = 300

    /// The account that has `transactionID`: `accountID` if given, else the only one.
    private func owner(of transactionID: String, accountID: String?) async throws -> String {
        if let accountID { return accountID }
        let rows = try await pool.preparedQuery(
            "SELECT account_id FROM transactions WHERE transaction_id = \(transactionID) ORDER BY account_id LIMIT 10"
        )
        let accounts = try rows.map { try $0.decode(String.self, at: 0) }
        guard let first = accounts.first else { throw Failure.notFound(transactionID: transactionID, accountID: nil) }
        guard accounts.count == 1 else { throw Failure.ambiguous(transactionID: transactionID, accounts: accounts) }
        return first
    }
}
