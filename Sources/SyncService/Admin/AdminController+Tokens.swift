import Foundation
import Hummingbird
import SyncStore

extension AdminController {
    /// `POST /v1/admin/accounts/{id}/revoke-tokens`: `subsync tokens revoke` for one account
    /// (issue #52 item 5). Every device token of the account issued before now (the database's
    /// clock) and a minute more (``TokenRevocations/margin``) is refused with 401 `token_revoked`
    /// from then on (by this process at once, by others within seconds); tokens issued
    /// afterwards work. Body: `actor`, `reason` (both optional); audited. The
    /// account need not have a state yet: a token may exist before its first sync.
    func addTokenRoutes(to admin: RouterGroup<SubsyncRequestContext>) {
        admin.post("accounts/:account_id/revoke-tokens") { request, context in
            let key = try await requireAdmin(request)
            let accountID = try AccountController.accountID(context)
            let body = try await request.decodeJSON(TokenRevokeRequest.self, emptyIsObject: true, context: context)
            let actor = try Self.actor(body.actor, key: key, namedKeys: authenticator.hasNamedAdminKeys)
            let reason = try Self.reason(body.reason)
            let revocation = try await TokenRevocations(pool: pool).revoke(accountID, actor: actor, reason: reason)
            authenticator.revocations?.note(accountID, revocation.revokedBefore)
            logger.notice("operator revoked an account's device tokens", metadata: ["account": "\(accountID)", "actor": "\(actor)"])
            return try JSONResponse.make(revocation)
        }
    }

    struct TokenRevokeRequest: Decodable {
        var actor: String?
        var reason: String?
    }
}
