import Foundation
import Hummingbird
import HummingbirdTesting
import JWTKit
import Postgres
import SyncCore
import SyncService
import TestSupport
import Testing

@Suite("Sync API: authentication and bad input")
struct AuthAndLimitsTests {
    static func body(_ reports: [Report]? = nil) throws -> Data {
        try SyncBody(device: "iphone", reports: reports ?? [TestReports.report("r1")]).data
    }

    /// A valid body whose first report's `observed_at` is `text`.
    static func bodyWithObservedAt(_ text: String) -> Data {
        let json = (try? body()).map { String(decoding: $0, as: UTF8.self) } ?? ""
        let pattern = #/"observed_at":"[^"]*"/#
        return Data(json.replacing(pattern, with: "\"observed_at\":\"\(text)\"", maxReplacements: 1).utf8)
    }

    @Test("a device token works until its expiry on the service's clock, and not a moment after")
    func tokenExpiresOnTheServiceClock() async throws {
        try await TestEnvironment.withFresh { env in
            let clock = ManualClock()
            let authenticator = await Authenticator(adminKey: nil, tokenSecret: TestCredentials.tokenSecret, clock: clock)
            try await env.application(workers: 0, authenticator: authenticator).test(.router) { client in
                let token = try await authenticator.mint(accountID: "tess", validFor: 600)
                let first = try await client.sync(account: "tess", body: try Self.body([TestReports.report("a")]), credential: token, waitMilliseconds: nil)
                #expect(first.status == .accepted)
                clock.advance(by: .seconds(599))
                let last = try await client.sync(account: "tess", body: try Self.body([TestReports.report("b")]), credential: token, waitMilliseconds: nil)
                #expect(last.status == .accepted)
                clock.advance(by: .seconds(1))
                let late = try await client.sync(account: "tess", body: try Self.body([TestReports.report("c")]), credential: token, waitMilliseconds: nil)
                #expect(late.status == .unauthorized)
                #expect(late.json.errorCode == "token_expired")
                #expect(try await env.count("reports", accountID: "tess") == 2)
            }
        }
    }

    @Test("revoking an account's tokens (admin routes, subsync tokens revoke, unrevoke): tokens issued before the line (the database's now and a minute) are refused, later ones work, other accounts untouched, audited")
    func tokenRevocation() async throws {
        try await TestEnvironment.withFresh { env in
            let clock = ManualClock(start: Date())
            let authenticator = await Authenticator(adminKey: TestCredentials.adminKey, tokenSecret: TestCredentials.tokenSecret, clock: clock)
            try await env.application(workers: 0, clock: clock, authenticator: authenticator).test(.router) { client in
                // The stolen phone's token, issued a minute ago, and another account's.
                let stolen = try await authenticator.mint(accountID: "rex", validFor: 3000, now: clock.now().addingTimeInterval(-60))
                let ada = try await authenticator.mint(accountID: "ada", validFor: 3000)
                #expect(try await client.getJSON("/v1/accounts/rex", credential: stolen).status == .ok)
                #expect(try await client.getJSON("/v1/accounts/ada", credential: ada).status == .ok)
                // A device cannot revoke (not even its own account's tokens).
                let (denied, _) = try await client.postJSON("/v1/admin/accounts/rex/revoke-tokens", body: Data("{}".utf8), credential: stolen)
                #expect(denied == .forbidden || denied == .unauthorized)

                let (status, answer) = try await client.postJSON(
                    "/v1/admin/accounts/rex/revoke-tokens", body: Data(#"{"actor": "ops-ann", "reason": "phone stolen"}"#.utf8))
                #expect(status == .ok, "\(answer)")
                let line = try #require((answer["revoked_before"] as? String).flatMap(RFC3339.parse))
                #expect(line > Date().addingTimeInterval(50), "the line is the database's now and a minute: \(line)")
                let refused = try await client.getJSON("/v1/accounts/rex", credential: stolen)
                #expect(refused.status == .unauthorized)
                #expect(refused.json.errorCode == "token_revoked")
                let sync = try await client.sync(account: "rex", body: try Self.body([TestReports.report("stolen-1")]), credential: stolen, waitMilliseconds: nil)
                #expect(sync.status == .unauthorized)
                #expect(try await env.count("reports", accountID: "rex") == 0)
                #expect(try await client.getJSON("/v1/accounts/ada", credential: ada).status == .ok, "another account's tokens still work")

                // From the command line, another process.
                let out = try await SubsyncCommand.run(["tokens", "revoke", "--account", "ada", "--reason", "ticket 881", "--json"], env: env)
                #expect(out.status == 0, "\(out.stderr)")
                #expect(out.object["account_id"] as? String == "ada")
                #expect(out.stderr.contains("no account ada has synced yet"), "ada never synced (a read makes no account): \(out.stderr)")
                let bad = try await SubsyncCommand.run(["tokens", "revoke", "--account", "ada\nforged"], env: env)
                #expect(bad.status == 64)

                // Past the line: what the service reads next has ada's revocation; a token
                // issued inside the margin is refused, one issued after the line works.
                clock.advance(by: .seconds(line.timeIntervalSince(clock.now()) + 1))
                #expect(try await client.getJSON("/v1/accounts/ada", credential: ada).json.errorCode == "token_revoked")
                let inMargin = try await authenticator.mint(accountID: "rex", validFor: 600, now: line.addingTimeInterval(-10))
                #expect(try await client.getJSON("/v1/accounts/rex", credential: inMargin).json.errorCode == "token_revoked")
                let fresh = try await authenticator.mint(accountID: "rex", validFor: 600)
                #expect(try await client.getJSON("/v1/accounts/rex", credential: fresh).status == .ok)

                // Taken back: the old token counts by its expiry again, once the service has read it.
                let undo = try await SubsyncCommand.run(["tokens", "unrevoke", "--account", "rex", "--reason", "found the phone"], env: env)
                #expect(undo.status == 0, "\(undo.stderr)")
                clock.advance(by: .seconds(6))
                #expect(try await client.getJSON("/v1/accounts/rex", credential: stolen).status == .ok)
                let again = try await SubsyncCommand.run(["tokens", "unrevoke", "--account", "rex"], env: env)
                #expect(again.status == 66)

                // Taken back through the admin route: at once in this process, no read needed.
                let (deviceUndo, _) = try await client.postJSON("/v1/admin/accounts/ada/unrevoke-tokens", body: Data("{}".utf8), credential: ada)
                #expect(deviceUndo == .forbidden || deviceUndo == .unauthorized, "a device cannot take a revocation back")
                let (undoStatus, undone) = try await client.postJSON(
                    "/v1/admin/accounts/ada/unrevoke-tokens", body: Data(#"{"actor": "ops-ann", "reason": "wrong account"}"#.utf8))
                #expect(undoStatus == .ok, "\(undone)")
                #expect(undone["account_id"] as? String == "ada")
                #expect((undone["audit"] as? [String: Any])?["action"] as? String == "tokens_unrevoke")
                #expect(try await client.getJSON("/v1/accounts/ada", credential: ada).status == .ok)
                let (noneStatus, none) = try await client.postJSON("/v1/admin/accounts/ada/unrevoke-tokens", body: Data("{}".utf8))
                #expect(noneStatus == .notFound)
                #expect(none.errorCode == "not_revoked")
                #expect(try await env.scalar("SELECT count(*) FROM operator_actions WHERE action = 'tokens_revoke'") == 2)
                #expect(try await env.scalar("SELECT count(*) FROM operator_actions WHERE action = 'tokens_unrevoke'") == 2)
                #expect(try await env.scalar("SELECT count(*) FROM operator_actions WHERE action = 'tokens_revoke' AND actor = 'ops-ann' AND account_id = 'rex'") == 1)
            }
        }
    }

    @Test("a token living longer than SUBSYNC_TOKEN_MAX_LIFETIME is refused whatever its exp says; tokens mint keeps under it")
    func tokenMaximumLifetime() async throws {
        try await TestEnvironment.withFresh { env in
            let clock = ManualClock()
            let authenticator = await Authenticator(adminKey: nil, tokenSecret: TestCredentials.tokenSecret, clock: clock, maximumLifetime: 3600)
            try await env.application(workers: 0, authenticator: authenticator).test(.router) { client in
                let hour = try await authenticator.mint(accountID: "liv", validFor: 3600)
                #expect(try await client.getJSON("/v1/accounts/liv", credential: hour).status == .ok)
                let year = try await authenticator.mint(accountID: "liv", validFor: 365 * 86_400)
                let refused = try await client.getJSON("/v1/accounts/liv", credential: year)
                #expect(refused.status == .unauthorized)
                #expect(refused.json.errorCode == "token_lifetime_exceeded")
            }
            let secret = ["SUBSYNC_TOKEN_SECRET": TestCredentials.tokenSecret]
            let tooLong = try await SubsyncCommand.run(["tokens", "mint", "--account", "liv", "--ttl", "31536000"], env: nil, extra: secret)
            #expect(tooLong.status == 64 && tooLong.stderr.contains("SUBSYNC_TOKEN_MAX_LIFETIME"), "\(tooLong.stderr)")
            let allowed = try await SubsyncCommand.run(
                ["tokens", "mint", "--account", "liv", "--ttl", "31536000"], env: nil, extra: secret.merging(["SUBSYNC_TOKEN_MAX_LIFETIME": "31536000"]) { $1 })
            #expect(allowed.status == 0, "\(allowed.stderr)")
        }
    }

    @Test("token secrets rotate by kid: the previous secret's tokens still work, a token is refused before its nbf")
    func tokenSecretRotationAndNotBefore() async throws {
        let (old, new, other) = (String(repeating: "o", count: 40), String(repeating: "n", count: 40), String(repeating: "x", count: 40))
        let clock = ManualClock()
        let rotating = await Authenticator(adminKey: nil, tokenSecret: new, previousTokenSecrets: [old], clock: clock)
        let rotated = await Authenticator(adminKey: nil, tokenSecret: new, clock: clock)
        let oldToken = try await Authenticator(adminKey: nil, tokenSecret: old, clock: clock).mint(accountID: "rob", validFor: 600)
        let newToken = try await rotating.mint(accountID: "rob", validFor: 600)
        let foreign = try await Authenticator(adminKey: nil, tokenSecret: other, clock: clock).mint(accountID: "rob", validFor: 600)
        #expect(Authenticator.keyID(old) != Authenticator.keyID(new))
        #expect(!Authenticator.keyID(new).string.contains(new.prefix(8)), "the key id does not reveal the secret")
        try await TestEnvironment.withFresh { env in
            try await env.application(workers: 0, authenticator: rotating).test(.router) { client in
                let cases: [(String, HTTPResponse.Status)] = [(oldToken, .ok), (newToken, .ok), (foreign, .unauthorized)]
                for (token, expected) in cases {
                    let status = try await client.getJSON("/v1/accounts/rob", credential: token).status
                    #expect(status == expected)
                }
            }
            try await env.application(workers: 0, authenticator: rotated).test(.router) { client in
                #expect(try await client.getJSON("/v1/accounts/rob", credential: oldToken).status == .unauthorized, "rotation over")
                #expect(try await client.getJSON("/v1/accounts/rob", credential: newToken).status == .ok)
                // A token that starts to count in 10 minutes (beyond the minute of leeway).
                let early = try await rotated.mint(accountID: "rob", validFor: 3600, now: clock.now().addingTimeInterval(600))
                let refused = try await client.getJSON("/v1/accounts/rob", credential: early)
                #expect(refused.status == .unauthorized)
                #expect(refused.json.errorCode == "token_not_yet_valid")
                clock.advance(by: .seconds(600))
                #expect(try await client.getJSON("/v1/accounts/rob", credential: early).status == .ok)
            }
        }
    }

    @Test("with SUBSYNC_METRICS_TOKEN set, /metrics needs it as a bearer token")
    func metricsToken() async throws {
        try await TestEnvironment.withFresh { env in
            let token = "metrics-token-0123456789"
            try await env.application(workers: 0, metricsToken: token).test(.router) { client in
                let cases: [(String?, HTTPResponse.Status)] = [
                    (nil, .unauthorized), ("wrong-token-0123456789", .unauthorized), (TestCredentials.adminKey, .unauthorized), (token, .ok),
                ]
                for (credential, expected) in cases {
                    var headers: HTTPFields = [:]
                    if let credential { headers[.authorization] = "Bearer \(credential)" }
                    try await client.execute(uri: "/metrics", method: .get, headers: headers) { response in
                        #expect(response.status == expected, "\(credential ?? "none")")
                    }
                }
            }
            try await env.application(workers: 0).test(.router) { client in
                try await client.execute(uri: "/metrics", method: .get) { response in #expect(response.status == .ok) }
            }
        }
    }

    @Test("what a token says is quoted in logs: a forged alg cannot forge a log line")
    func verificationErrorsAreQuoted() {
        let error = StoreKitVerificationError.unsupportedAlgorithm("none\n2026-01-01 critical: forged\u{1B}[2J\"")
        #expect(!error.description.contains("\n") && !error.description.contains("\u{1B}"))
        #expect(error.description == #"unsupported_algorithm: "none\n2026-01-01 critical: forged\u{1B}[2J\"""#)
        let long = StoreKitVerificationError.malformed(String(repeating: "a", count: 5000))
        #expect(long.description.count < 140)
    }

    @Test("missing, malformed, wrong and expired credentials are 401; another account's token is 403; nothing is stored")
    func authentication() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application(workers: 0).test(.router) { client in
                let valid = try await env.token(for: "alice")
                let expired = try await env.authenticator.mint(accountID: "alice", validFor: 60, now: Date().addingTimeInterval(-3600))
                let otherSecret = JWTKeyCollection()
                await otherSecret.add(hmac: HMACKey(from: "another-secret-another-secret-0123456789"), digestAlgorithm: .sha256)
                let forged = try await otherSecret.sign(AccountToken(accountID: "alice", expiresAt: Date().addingTimeInterval(3600), issuedAt: Date()))
                let cases: [(String?, HTTPResponse.Status, String)] = [
                    (nil, .unauthorized, "unauthenticated"),
                    ("not-a-jwt", .unauthorized, "invalid_token"),
                    (forged, .unauthorized, "invalid_token"),
                    (expired, .unauthorized, "token_expired"),
                    (String(TestCredentials.adminKey.dropLast()), .unauthorized, "invalid_token"),
                    (try await env.token(for: "mallory"), .forbidden, "forbidden"),
                ]
                for (credential, status, code) in cases {
                    let result = try await client.sync(account: "alice", body: try Self.body(), credential: credential, waitMilliseconds: nil)
                    #expect(result.status == status, "credential \(credential?.prefix(12) ?? "none")")
                    #expect(result.json.errorCode == code)
                }
                #expect(try await env.count("reports", accountID: "alice") == 0)

                let ok = try await client.sync(account: "alice", body: try Self.body(), credential: valid, waitMilliseconds: nil)
                #expect(ok.status == .accepted)
                #expect(try await env.getForbiddenRead(client, token: valid, account: "bob") == .forbidden)
            }
        }
    }

    @Test("each input limit rejects the whole request with a specific error and stores nothing")
    func inputLimits() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application(workers: 0).test(.router) { client in
                let tooMany = try Self.body((0..<101).map { TestReports.report("r\($0)") })
                var badDate = TestReports.report("bad-date")
                badDate.expiresAt = Date(timeIntervalSince1970: 5_000_000_000)  // year 2128
                var expiresFirst = TestReports.report("backwards")
                expiresFirst.expiresAt = expiresFirst.purchasedAt.addingTimeInterval(-10)
                let mixed = try Self.body([TestReports.report("good"), badDate])
                let huge = Data(repeating: UInt8(ascii: " "), count: (1 << 20) + 10)
                let cases: [(String, Data, HTTPResponse.Status, String, String?)] = [
                    ("alice", tooMany, .unprocessableContent, "too_many_reports", "101"),
                    ("alice", mixed, .unprocessableContent, "invalid_report", "reports[1].expires_at"),
                    ("alice", try Self.body([expiresFirst]), .unprocessableContent, "invalid_report", "reports[0]"),
                    ("alice", Data("{\"device\": {\"id\": \"x\"}, \"reports\": [{\"report_id\": 5}]}".utf8), .badRequest, "invalid_request", "reports[0].report_id"),
                    ("alice", Data("{\"device\": {\"id\": \"x\"}, \"reports\": [{}]}".utf8), .badRequest, "invalid_request", "reports[0].report_id is required"),
                    ("alice", Data("{\"device\": {\"id\": \"x\"}}".utf8), .badRequest, "invalid_request", "reports is required"),
                    ("alice", Data("{\"device\": {\"id\": \"bad id\"}, \"reports\": []}".utf8), .badRequest, "invalid_request", "device.id"),
                    ("alice", Data("not json".utf8), .badRequest, "invalid_request", "not valid JSON"),
                    ("alice", Self.bodyWithObservedAt("99999999999999999999-01-01T00:00:00Z"), .badRequest, "invalid_request", "reports[0].observed_at"),
                    ("alice", Self.bodyWithObservedAt("2026-02-30T25:61:00Z"), .badRequest, "invalid_request", "reports[0].observed_at"),
                    ("alice", huge, .contentTooLarge, "body_too_large", nil),
                    ("null%20OR%201=1", try Self.body(), .badRequest, "invalid_account_id", nil),
                    (String(repeating: "a", count: 129), try Self.body(), .badRequest, "invalid_account_id", nil),
                ]
                for (account, body, status, code, mentions) in cases {
                    let result = try await client.sync(account: account, body: body, waitMilliseconds: nil)
                    #expect(result.status == status, "expected \(status) for \(code), got \(result.status)")
                    #expect(result.json.errorCode == code)
                    if let mentions {
                        #expect(result.json.errorMessage?.contains(mentions) == true, "message: \(result.json.errorMessage ?? "-")")
                    }
                }
                #expect(try await env.count("reports", accountID: "alice") == 0)
                #expect(try await env.count("devices", accountID: "alice") == 0)

                let badWait = try await client.sync(account: "alice", body: try Self.body(), waitMilliseconds: -5)
                #expect(badWait.status == .badRequest)
            }
        }
    }

    @Test("unknown fields are ignored")
    func unknownFieldsIgnored() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application(workers: 0).test(.router) { client in
                var object = try JSONSerialization.jsonObject(with: try Self.body()) as? [String: Any] ?? [:]
                object["extra"] = ["nested": true]
                let body = try JSONSerialization.data(withJSONObject: object)
                let result = try await client.sync(account: "alice", body: body, waitMilliseconds: nil)
                #expect(result.status == .accepted)
                #expect(result.json["accepted"] as? Int == 1)
            }
        }
    }
}

extension TestEnvironment {
    func getForbiddenRead(_ client: some TestClientProtocol, token: String, account: String) async throws -> HTTPResponse.Status {
        try await client.getJSON("/v1/accounts/\(account)", credential: token).status
    }
}
