import Foundation
import Hummingbird
import SyncStore

extension AdminController {
    /// `POST /v1/admin/accounts/{id}/revoke-tokens` and `.../unrevoke-tokens`.
    ///
    /// `revoke-tokens`: `subsync tokens revoke` for one account (docs/SECURITY.md, *Credentials
    /// and tokens*). Every device token of the account issued before now (the database's
    /// clock) and a minute more (``TokenRevocations/margin``) is refused with 401 `token_revoked`
    /// from then on (by this process at once, by others within seconds); tokens issued
    /// afterwards work. Body: `actor`, `reason` (both optional); audited. The
    /// account need not have a state yet: a token may exist before its first sync.
    func addTokenRoutes(to admin: RouterGroup<SubsyncRequestContext>) {
        admin.post("accounts/:account_id/revoke-tokens") { request, context in
            let key = try await requireAdmin(request)
            let accountID = try AccountController.accountID(context)
            let body = try await request.decodeJSON(TokenRevokeRequest.self, emptyIsObject: true, context: context)
            let actor = try actor(body.actor, key: key)
            let reason = try Self.reason(body.reason)
            let revocation = try await TokenRevocations(pool: pool).revoke(accountID, actor: actor, reason: reason)
            authenticator.revocations?.note(accountID, revocation.revokedBefore)
            logger.notice("operator revoked an account's device tokens", metadata: ["account": "\(accountID)", "actor": "\(actor)"])
            return try JSONResponse.make(revocation)
        }

        /// `POST /v1/admin/accounts/{id}/unrevoke-tokens`: `subsync tokens unrevoke` (a
        /// revocation made by mistake): the account's tokens count by their expiry alone again
        /// (in this process at once, in others within seconds). 404 `not_revoked` when there is
        /// no revocation to take back. Body: `actor`, `reason` (both optional); audited.
        admin.post("accounts/:account_id/unrevoke-tokens") { request, context in
            let key = try await requireAdmin(request)
            let accountID = try AccountController.accountID(context)
            let body = try await request.decodeJSON(TokenRevokeRequest.self, emptyIsObject: true, context: context)
            let actor = try actor(body.actor, key: key)
            let reason = try Self.reason(body.reason)
            guard let audit = try await TokenRevocations(pool: pool).unrevoke(accountID, actor: actor, reason: reason) else {
                throw APIError(.notFound, code: "not_revoked", message: "the device tokens of this account are not revoked")
            }
            authenticator.revocations?.forget(accountID)
            logger.notice("operator took back a revocation of an account's device tokens", metadata: ["account": "\(accountID)", "actor": "\(actor)"])
            return try JSONResponse.make(TokenUnrevocation(accountID: accountID, actor: actor, audit: audit))
        }
    }

    /// What `unrevoke-tokens` answers.
    struct TokenUnrevocation: Encodable {
        var accountID: String
        var actor: String
        var audit: OperatorLog.Action

        enum CodingKeys: String, CodingKey {
            case accountID = "account_id"
            case actor, audit
        }
    }

    struct TokenRevokeRequest: Decodable {
        var actor: String?
        var reason: String?
    }
}
