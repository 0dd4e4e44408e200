import Foundation
import Hummingbird
import Logging
import Postgres
import SyncCore
import SyncStore

/// `/v1/admin/...`: what the operator console (and any script holding the admin key) reads and
/// does beyond the public API — the JSON form of `subsync accounts show`, `revoke`/`unrevoke`,
/// `reconcile --account`, `deliveries ...` and `stats`. Admin key only; every action is logged
/// with its actor, and answers with the record of what it did.
///
/// The routes reuse the operator commands' own SyncStore types, so the console and the command
/// line cannot disagree.
struct AdminController: Sendable {
    let pool: ConnectionPool
    let catalogue: Catalogue
    let authenticator: Authenticator
    let deliveries: DeliveryStore
    let history: MetricsHistory
    /// How often ``history`` gets a sample (the metrics sampler's interval).
    let sampleInterval: Duration
    let clock: any ServiceClock
    let logger: Logger
    /// Reconciles against the App Store, when its Server API is configured (docs/STORE.md).
    var storeReconciler: AppStoreReconciler?

    func addRoutes(to router: Router<SubsyncRequestContext>) {
        let admin = router.group("v1/admin")
        addAccountRoutes(to: admin)
        addTokenRoutes(to: admin)
        addStoreRoutes(to: admin)
        addDeliveryRoutes(to: admin)
        addHealthRoutes(to: admin)
    }

    private func addAccountRoutes(to admin: RouterGroup<SubsyncRequestContext>) {
        // Which admin key this is (the console shows it; audit records carry it as the actor).
        admin.get("whoami") { request, _ in
            let key = try await requireAdmin(request)
            let shared = key == Authenticator.legacyAdminName
            return try JSONResponse.make(WhoAmI(
                name: key, named: !shared, recordsAs: shared && !authenticator.hasNamedAdminKeys ? nil : key))
        }
        admin.get("accounts") { request, _ in
            try await requireAdmin(request)
            let query = (request.uri.queryParameters.get("q") ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            guard (1...200).contains(query.count), !query.contains("\u{0}") else {
                throw APIError(.badRequest, code: "invalid_query", message: "q must be 1–200 characters: an account id, a transaction id or an app account token")
            }
            let matches = try await AccountSearch(pool: pool).find(query)
            return try JSONResponse.make(SearchAnswer(query: query, matches: matches))
        }
        admin.get("accounts/:account_id") { request, context in
            try await requireAdmin(request)
            let accountID = try AccountController.accountID(context)
            let inspector = AccountInspector(pool: pool, catalogue: catalogue)
            guard let details = try await inspector.details(accountID: accountID, eventLimit: 200, now: clock.now()) else {
                throw Self.accountNotFound
            }
            let timeline = AccountTimeline(
                details: details, deliveries: try await deliveries.deliveries(ofAccount: accountID),
                actions: try await OperatorLog(pool: pool).actions(ofAccount: accountID))
            return try JSONResponse.make(AccountAnswer(account: details, timeline: timeline.entries, appStore: storeReconciler != nil))
        }
        admin.post("accounts/:account_id/revoke") { request, context in
            try await override(.revoke, request: request, context: context)
        }
        admin.post("accounts/:account_id/unrevoke") { request, context in
            try await override(.unrevoke, request: request, context: context)
        }
        admin.post("accounts/:account_id/reconcile") { request, context in
            let key = try await requireAdmin(request)
            let accountID = try AccountController.accountID(context)
            let body = try await request.decodeJSON(ReconcileRequest.self, emptyIsObject: true, context: context)
            let actor = try actor(body.actor, key: key)
            let reason = try Self.reason(body.reason)
            let reconciler = Reconciler(pool: pool, catalogue: catalogue, clock: clock, logger: logger)
            guard try await reconciler.accountExists(accountID) else { throw Self.accountNotFound }
            let dryRun = body.dryRun ?? true
            let result = try await reconciler.reconcile(accounts: [accountID], repair: !dryRun)
            let repaired = result.accountsRepaired > 0
            let audit = try await OperatorLog(pool: pool).record(
                at: clock.now(), actor: actor, action: dryRun ? "reconcile_dry_run" : "reconcile", accountID: accountID, reason: reason,
                outcome: "\(result.differences.count) difference(s)" + (repaired ? "; repaired, \(result.eventsWritten) event(s) written" : ""))
            let answer = ReconcileAnswer(
                accountID: accountID, dryRun: dryRun, differences: result.differences, repaired: repaired,
                eventsWritten: result.eventsWritten, actor: actor, at: audit.at, audit: audit)
            logger.notice(
                "operator reconciled an account",
                metadata: ["account": "\(accountID)", "actor": "\(actor)", "dry_run": "\(dryRun)", "differences": "\(result.differences.count)"])
            return try JSONResponse.make(answer)
        }
    }

    /// `revoke` / `unrevoke` of one of the account's transactions, recorded as an audited admin
    /// report (``AdminOverride``); the answer is that record.
    private func override(_ action: AdminAction, request: Request, context: SubsyncRequestContext) async throws -> Response {
        let key = try await requireAdmin(request)
        let accountID = try AccountController.accountID(context)
        let body = try await request.decodeJSON(OverrideRequest.self, context: context)
        let actor = try actor(body.actor, key: key)
        let reason = try Self.recordedText(body.reason, field: "reason", maximum: 500, saying: "why (it is recorded)")
        guard Identifier.isValid(body.transactionID) else {
            throw APIError(.badRequest, code: "invalid_request", message: "transaction_id: 1–128 characters of letters, digits and ._:@-")
        }
        do {
            let result = try await AdminOverride(pool: pool, catalogue: catalogue, clock: clock, logger: logger)
                .apply(action, transactionID: body.transactionID, accountID: accountID, actor: actor, reason: reason)
            logger.notice(
                "operator override",
                metadata: ["action": "\(action.rawValue)", "account": "\(accountID)", "transaction": "\(body.transactionID)",
                           "actor": "\(actor)", "recorded": "\(result.recorded)"])
            return try JSONResponse.make(result)
        } catch let failure as AdminOverride.Failure {
            throw APIError(.notFound, code: "transaction_not_found", message: failure.description)
        }
    }

    /// The admin key's name (see ``actor(_:key:)``).
    @discardableResult
    func requireAdmin(_ request: Request) async throws -> String {
        try await authenticator.requireAdmin(request, for: "admin routes")
    }

    static let accountNotFound = APIError(.notFound, code: "account_not_found", message: "nothing is stored for this account")

    /// Who acts, as recorded: 1–128 characters; `admin` when not given.
    /// An optional `reason` of an action, recorded with it in the audit log.
    static func reason(_ given: String?) throws -> String? {
        try given.map { try recordedText($0, field: "reason", maximum: 500, saying: "why (it is recorded)") }
    }

    ///
    /// With a named admin key (`SUBSYNC_ADMIN_KEYS`) the key's name is the actor, whatever the
    /// body says: a body's `actor` is kept beside it as a note, `name (note)`. The shared
    /// `SUBSYNC_ADMIN_KEY` (named `admin`, a name no named key may take) cannot tell people
    /// apart: alone, the body's `actor` is all there is, as before; beside named keys it is
    /// `admin (note)`, so that it can never pass for a named key's record.
    static func actor(_ given: String?, key: String, namedKeys: Bool) throws -> String {
        let note = try given.map { try recordedText($0, field: "actor", maximum: 128, saying: "who acts") }
        if key == Authenticator.legacyAdminName && !namedKeys { return note ?? key }
        guard let note, note != key else { return key }
        return "\(key) (\(note))"
    }

    /// ``actor(_:key:namedKeys:)`` with this service's admin keys.
    func actor(_ given: String?, key: String) throws -> String {
        try Self.actor(given, key: key, namedKeys: authenticator.hasNamedAdminKeys)
    }

    /// `text` trimmed, when it is 1...`maximum` characters without NUL (which PostgreSQL's text
    /// cannot hold); else 400 `invalid_request` naming `field`.
    static func recordedText(_ text: String, field: String, maximum: Int, saying what: String) throws -> String {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard (1...maximum).contains(trimmed.count), !trimmed.contains("\u{0}") else {
            throw APIError(.badRequest, code: "invalid_request", message: "\(field): 1–\(maximum) characters (no NUL) saying \(what)")
        }
        return trimmed
    }
}

extension AdminController {
    struct SearchAnswer: Encodable {
        var query: String
        var matches: [AccountSearch.Match]
    }

    struct AccountAnswer: Encodable {
        var account: AccountInspector.Details
        var timeline: [AccountTimeline.Entry]
        /// Whether `reconcile-store` is available (the App Store Server API is configured).
        var appStore: Bool

        enum CodingKeys: String, CodingKey {
            case account, timeline
            case appStore = "app_store"
        }
    }

    struct OverrideRequest: Decodable {
        var transactionID: String
        var reason: String
        var actor: String?

        enum CodingKeys: String, CodingKey {
            case transactionID = "transaction_id"
            case reason, actor
        }
    }

    struct WhoAmI: Encodable {
        /// The key's name in `SUBSYNC_ADMIN_KEYS`, or `admin` for `SUBSYNC_ADMIN_KEY`.
        var name: String
        /// Whether the key names its holder (audit records then carry that name).
        var named: Bool
        /// The name audit records carry before a request's `actor` (as `name (actor)`); `nil`
        /// for the shared key alone, whose records carry the `actor` as given.
        var recordsAs: String?

        enum CodingKeys: String, CodingKey {
            case name, named
            case recordsAs = "records_as"
        }
    }

    struct ReconcileRequest: Decodable {
        /// Default true: looking changes nothing.
        var dryRun: Bool?
        var actor: String?
        var reason: String?

        enum CodingKeys: String, CodingKey {
            case dryRun = "dry_run"
            case actor, reason
        }
    }

    struct ReconcileAnswer: Encodable {
        var accountID: String
        var dryRun: Bool
        var differences: [Difference]
        var repaired: Bool
        var eventsWritten: Int
        var actor: String
        var at: Date
        /// The audit record written (sql/0015).
        var audit: OperatorLog.Action

        enum CodingKeys: String, CodingKey {
            case accountID = "account_id"
            case dryRun = "dry_run"
            case differences, repaired
            case eventsWritten = "events_written"
            case actor, at, audit
        }
    }
}
