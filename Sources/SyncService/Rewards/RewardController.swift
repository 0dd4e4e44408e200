import Foundation
import Hummingbird
import Logging
import SyncCore
import SyncStore

/// `GET /v1/rewards/admob`: AdMob's server-side verification callback for rewarded ads
/// (docs/USAGE.md). No credential: the signature is the authentication.
struct RewardController: Sendable {
    /// `nil` when neither `SUBSYNC_ADMOB_KEYS_FILE` nor `SUBSYNC_ADMOB_KEYS_URL` is set.
    let keys: AdMobKeys?
    /// `SUBSYNC_ADMOB_AD_UNITS`: the app's own rewarded ad units; callbacks of any other are refused.
    let adUnits: Set<String>
    let ledger: UsageLedger
    let catalogue: Catalogue
    let clock: any ServiceClock
    /// Per source address, like App Store notifications: each forged callback costs a signature check.
    let limiter: RateLimiter?
    /// Whose forwarded address counts as the source (``TrustedProxies``).
    var proxies: TrustedProxies = .none
    /// Reward tokens (``RewardTokens``): issued to devices, required in callbacks when
    /// ``requireTokens``; `nil` without `SUBSYNC_TOKEN_SECRET`.
    var tokens: RewardTokens?
    /// `SUBSYNC_ADMOB_REWARD_TOKENS` (default on): a callback counts only with a valid reward
    /// token in `custom_data`, for the account it names, once per token.
    var requireTokens = false
    /// Checks the device token of the reward token route.
    var authenticator: Authenticator?
    let logger: Logger

    /// How old a callback may be (AdMob retries for a while) and how far ahead of our clock.
    static let maximumAge: TimeInterval = 86_400
    static let maximumLead: TimeInterval = 5 * 60

    func addRoutes(to router: Router<SubsyncRequestContext>) {
        // A reward token for the account, to pass to AdMob as custom_data (a device, its own
        // account only; or the admin key).
        router.post("v1/accounts/:account_id/rewards/token") { request, context in
            let accountID = try AccountController.accountID(context)
            guard let authenticator else { throw APIError(.notFound, code: "rewards_not_configured", message: "rewarded ads are not configured") }
            _ = try await authenticator.authorize(request, accountID: accountID)
            guard keys != nil, let tokens else {
                throw APIError(.notFound, code: "rewards_not_configured",
                               message: "reward tokens need rewarded ads (SUBSYNC_ADMOB_KEYS_FILE or SUBSYNC_ADMOB_KEYS_URL) and SUBSYNC_TOKEN_SECRET")
            }
            let issued = tokens.issue(accountID: accountID, now: clock.now())
            return try JSONResponse.make(IssuedToken(accountID: accountID, token: issued.token, expiresAt: issued.expiresAt))
        }
        router.get("v1/rewards/admob") { request, context in
            if let limiter, let wait = await limiter.take(context.clientAddress(of: request, trusting: proxies)) {
                throw APIError.rateLimited(retryAfter: wait, what: "this address")
            }
            guard let keys else {
                throw APIError(.notFound, code: "rewards_not_configured",
                               message: "rewarded ads are not configured (SUBSYNC_ADMOB_KEYS_FILE or SUBSYNC_ADMOB_KEYS_URL)")
            }
            let raw = request.uri.query ?? ""
            let parsed: (callback: AdMobCallback, adUnit: String, message: Data, signature: Data)
            do throws(AdMobCallback.Refusal) {
                parsed = try AdMobCallback.parse(rawQuery: raw)
            } catch {
                throw Self.answer(for: error)
            }
            let callback = parsed.callback
            guard let key = await keys.key(callback.keyID) else { throw Self.answer(for: .unknownKey(callback.keyID)) }
            guard AdMobCallback.verify(message: parsed.message, signature: parsed.signature, key: key) else {
                throw Self.answer(for: .badSignature)
            }
            guard adUnits.contains(parsed.adUnit) else {
                throw APIError(.forbidden, code: "unknown_ad_unit", message: "ad_unit \(parsed.adUnit.prefix(64)) is not one of SUBSYNC_ADMOB_AD_UNITS")
            }
            guard Identifier.isValid(callback.accountID), !Identifier.isBlockedAccountID(callback.accountID) else {
                throw APIError(.badRequest, code: "invalid_account_id", message: "user_id is not a valid account id")
            }
            guard let meter = catalogue.meter(id: callback.meter) else {
                throw APIError(.unprocessableContent, code: "unknown_meter", message: "reward_item \"\(callback.meter.prefix(64))\" is not a meter of the catalogue")
            }
            guard let cap = meter.rewardsPerDay, cap > 0 else {
                throw APIError(.unprocessableContent, code: "rewards_disabled", message: "the catalogue gives meter \(meter.id) no rewards_per_day")
            }
            guard (1...UsageUnits.maximum).contains(callback.units) else {
                throw APIError(.unprocessableContent, code: "invalid_units", message: "reward_amount must be at least 1, got \(callback.units)")
            }
            let now = clock.now()
            guard callback.rewardedAt <= now.addingTimeInterval(Self.maximumLead), callback.rewardedAt >= now.addingTimeInterval(-Self.maximumAge) else {
                throw APIError(.unprocessableContent, code: "invalid_time", message: "the callback's timestamp is more than a day old or in the future")
            }
            let once = try rewardToken(of: callback)
            // Without required tokens, a token the app passed anyway still names the reward.
            let alsoOnce = once == nil ? callback.customData.flatMap { tokens?.verify($0) }.map(\.nonce) : nil
            let outcome = try await ledger.reward(
                accountID: callback.accountID, network: "admob", transactionID: callback.transactionID, meter: meter.id,
                units: callback.units, cap: cap, at: callback.rewardedAt, now: now, once: once, alsoOnce: alsoOnce)
            switch outcome {
            case .granted:
                logger.info("reward granted", metadata: ["account": "\(callback.accountID)", "units": "\(callback.units)"])
                return try JSONResponse.make(Granted(accountID: callback.accountID, meter: meter.id, units: callback.units))
            case .replayed:
                throw APIError(
                    .conflict, code: "reward_replayed",
                    message: once == nil
                        ? "transaction_id \(callback.transactionID.prefix(64)) was already granted"
                        : "this reward token was already used (one token is good for one reward)")
            case .overDailyCap(let cap, let today):
                throw APIError(.unprocessableContent, code: "daily_reward_cap",
                               message: "the account has \(today) of its \(cap) rewarded \(meter.id) today; this reward would pass the cap")
            }
        }
    }

    /// With tokens required: the nonce of the callback's valid reward token, which must name the
    /// callback's account and not have expired when AdMob rewarded; 403 otherwise. Without:
    /// `nil` (the reward counts once per AdMob transaction, for the account `user_id` names).
    private func rewardToken(of callback: AdMobCallback) throws -> String? {
        guard requireTokens else { return nil }
        guard let tokens else {
            throw APIError.unavailable("reward tokens need SUBSYNC_TOKEN_SECRET on this server", retryAfterSeconds: 60)
        }
        guard let text = callback.customData, let claims = tokens.verify(text) else {
            throw APIError(.forbidden, code: "invalid_reward_token",
                           message: "custom_data must be a reward token of this service (POST /v1/accounts/{id}/rewards/token)")
        }
        guard claims.accountID == callback.accountID else {
            throw APIError(.forbidden, code: "reward_token_mismatch", message: "the reward token is another account's than user_id")
        }
        guard callback.rewardedAt <= claims.expiresAt else {
            throw APIError(.forbidden, code: "reward_token_expired", message: "the reward token had expired when the ad was watched")
        }
        return claims.nonce
    }

    struct IssuedToken: Encodable {
        var accountID: String
        var token: String
        var expiresAt: Date

        enum CodingKeys: String, CodingKey {
            case accountID = "account_id"
            case token
            case expiresAt = "expires_at"
        }
    }

    static func answer(for refusal: AdMobCallback.Refusal) -> APIError {
        switch refusal {
        case .malformed(let problem): APIError(.badRequest, code: "invalid_request", message: problem)
        case .unknownKey(let id): APIError(.forbidden, code: "unknown_key", message: "no AdMob key with key_id \(id)")
        case .badSignature: APIError(.forbidden, code: "bad_signature", message: "the callback's signature does not verify")
        }
    }

    struct Granted: Encodable {
        var status = "granted"
        var accountID: String
        var meter: String
        var units: Int

        enum CodingKeys: String, CodingKey {
            case status, meter, units
            case accountID = "account_id"
        }
    }
}
