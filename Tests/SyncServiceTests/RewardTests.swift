import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import SyncCore
import SyncService
import TestSupport
import Testing

/// Rewarded ads through AdMob's server-side verification callback (docs/USAGE.md; the callback:
/// docs/API.md "Rewarded ads"), signed with
/// keys of our own in AdMob's published format; the signature is checked by the service, never
/// mocked.
@Suite("Rewarded ads (AdMob SSV)", .serialized)
struct RewardTests {
    /// A key pair and its entry in AdMob's key file format.
    struct SigningKey {
        let id: Int64
        let key = P256.Signing.PrivateKey()

        var entry: [String: Any] {
            ["keyId": id, "pem": key.publicKey.pemRepresentation, "base64": key.publicKey.derRepresentation.base64EncodedString()]
        }

        /// The callback's query string, signed as AdMob signs it.
        func callback(
            account: String, transaction: String, units: Int = 10, item: String = "minutes", at: Date = RewardTests.now, keyID: Int64? = nil,
            adUnit: String = RewardTests.adUnit, customData: String = "level%203"
        ) throws -> String {
            let timestamp = Int64((at.timeIntervalSince1970 * 1000).rounded())
            let query = "ad_network=5450213213286189855&ad_unit=\(adUnit)&custom_data=\(customData)&reward_amount=\(units)"
                + "&reward_item=\(item)&timestamp=\(timestamp)&transaction_id=\(transaction)&user_id=\(account)"
            let der = try key.signature(for: Data(query.utf8)).derRepresentation
            let signature = der.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            return query + "&signature=\(signature)&key_id=\(keyID ?? id)"
        }
    }

    /// Now, but never in the last minute of a UTC day, so that every reward of a test falls on
    /// the same day for the daily cap.
    static var now: Date {
        let date = Date()
        return date.timeIntervalSince1970.truncatingRemainder(dividingBy: 86_400) > 86_340 ? date.addingTimeInterval(-120) : date
    }

    /// The app's own rewarded ad unit (`SUBSYNC_ADMOB_AD_UNITS`).
    static let adUnit = "2747237135"

    static func keyFile(_ keys: [SigningKey]) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("admob-keys-\(UUID().uuidString).json")
        try JSONSerialization.data(withJSONObject: ["keys": keys.map(\.entry)]).write(to: url)
        return url
    }

    @Test("a valid callback grants once; a bad signature, an unknown key, a replay and the daily cap are refused and store nothing")
    func callbacks() async throws {
        let signing = SigningKey(id: 3_335_741_209)
        let file = try Self.keyFile([signing])
        defer { try? FileManager.default.removeItem(at: file) }
        let keys = AdMobKeys(source: .init(file: file.path), clock: SystemClock(), logger: Logger(label: "test"))
        try await keys.load()
        try await TestEnvironment.withFresh { env in
            try await env.application(adMobKeys: keys, adMobAdUnits: [Self.adUnit]).testLive { client in
                func get(_ query: String) async throws -> (HTTPResponse.Status, [String: Any]) {
                    try await client.getJSON("/v1/rewards/admob?\(query)", credential: nil)
                }
                let (status, granted) = try await get(try signing.callback(account: "rita", transaction: "tx-1"))
                #expect(status == .ok, "\(granted)")
                #expect(granted["status"] as? String == "granted")
                let (_, account) = try await client.getJSON("/v1/accounts/rita")
                #expect(UsageAPITests.minutes(account)?["rewards"] as? Int == 10)
                #expect(UsageAPITests.minutes(account)?["available"] as? Int == 110)

                // Replayed: the same transaction id.
                let (replay, replayJSON) = try await get(try signing.callback(account: "rita", transaction: "tx-1"))
                #expect(replay == .conflict)
                #expect(replayJSON.errorCode == "reward_replayed")
                // Tampered after signing: 10 minutes signed, 1000 asked.
                let tampered = try signing.callback(account: "rita", transaction: "tx-2").replacingOccurrences(of: "reward_amount=10", with: "reward_amount=1000")
                let (bad, badJSON) = try await get(tampered)
                #expect(bad == .forbidden)
                #expect(badJSON.errorCode == "bad_signature")
                // Signed by a key AdMob never published (another key, another id).
                let stranger = SigningKey(id: 42)
                let (unknown, unknownJSON) = try await get(try stranger.callback(account: "rita", transaction: "tx-3"))
                #expect(unknown == .forbidden)
                #expect(unknownJSON.errorCode == "unknown_key")
                // The right id, the wrong key.
                let (forged, forgedJSON) = try await get(try stranger.callback(account: "rita", transaction: "tx-4", keyID: signing.id))
                #expect(forged == .forbidden)
                #expect(forgedJSON.errorCode == "bad_signature")
                let (noSignature, noSignatureJSON) = try await get("user_id=rita&transaction_id=tx-5&reward_item=minutes&reward_amount=5")
                #expect(noSignature == .badRequest)
                #expect(noSignatureJSON.errorCode == "invalid_request")
                let (old, oldJSON) = try await get(try signing.callback(account: "rita", transaction: "tx-6", at: Date().addingTimeInterval(-3 * 86_400)))
                #expect(old == .unprocessableContent)
                #expect(oldJSON.errorCode == "invalid_time")
                // Signed by AdMob's key, but for another publisher's ad unit.
                let (foreign, foreignJSON) = try await get(try signing.callback(account: "rita", transaction: "tx-11", adUnit: "9999"))
                #expect(foreign == .forbidden)
                #expect(foreignJSON.errorCode == "unknown_ad_unit")
                // Nothing may follow the signature, and nothing signed may be given twice.
                let (appended, appendedJSON) = try await get(try signing.callback(account: "rita", transaction: "tx-12") + "&user_id=victim")
                #expect(appended == .badRequest)
                #expect(appendedJSON.errorCode == "invalid_request")
                let doubled = try signing.callback(account: "rita", transaction: "tx-13").replacingOccurrences(of: "user_id=rita", with: "user_id=rita&user_id=victim")
                let (twice, twiceJSON) = try await get(doubled)
                #expect(twice == .badRequest, "\(twiceJSON)")
                let (meter, meterJSON) = try await get(try signing.callback(account: "rita", transaction: "tx-7", item: "coins"))
                #expect(meter == .unprocessableContent)
                #expect(meterJSON.errorCode == "unknown_meter")

                // The default catalogue caps rewards at 30 minutes a day: two more of 10, then refused.
                for transaction in ["tx-8", "tx-9"] {
                    let (ok, json) = try await get(try signing.callback(account: "rita", transaction: transaction))
                    #expect(ok == .ok, "\(json)")
                }
                let (capped, cappedJSON) = try await get(try signing.callback(account: "rita", transaction: "tx-10"))
                #expect(capped == .unprocessableContent)
                #expect(cappedJSON.errorCode == "daily_reward_cap")
                #expect(try await env.scalar("SELECT count(*) FROM usage_entries WHERE kind = 'reward'") == 3)
                #expect(try await env.scalar("SELECT COALESCE(sum(units), 0)::int FROM usage_entries WHERE kind = 'reward'") == 30)
            }
        }
    }

    @Test("reward tokens (the default): a reward counts for the account its token names, once per token; a modified app naming another account, a forged, reused or expired token, or none, is refused; SubsyncClient fetches one")
    func rewardTokens() async throws {
        let signing = SigningKey(id: 5_005)
        let file = try Self.keyFile([signing])
        defer { try? FileManager.default.removeItem(at: file) }
        let keys = AdMobKeys(source: .init(file: file.path), clock: SystemClock(), logger: Logger(label: "test"))
        try await keys.load()
        try await TestEnvironment.withFresh { env in
            try await env.application(adMobKeys: keys, adMobAdUnits: [Self.adUnit], adMobRewardTokens: true).testLive { client in
                func get(_ query: String) async throws -> (HTTPResponse.Status, [String: Any]) {
                    try await client.getJSON("/v1/rewards/admob?\(query)", credential: nil)
                }
                func token(_ account: String, credential: String) async throws -> (HTTPResponse.Status, String?) {
                    let (status, json) = try await client.postJSON("/v1/accounts/\(account)/rewards/token", body: Data("{}".utf8), credential: credential)
                    return (status, json["token"] as? String)
                }
                let rita = try await token("rita", credential: try await env.token(for: "rita"))
                #expect(rita.0 == .ok)
                let ritaToken = try #require(rita.1)
                let mallory = try await env.token(for: "mallory")
                #expect(try await token("rita", credential: mallory).0 == .forbidden, "a device gets tokens for its own account only")
                let malloryToken = try #require(try await token("mallory", credential: mallory).1)

                var (status, json) = try await get(try signing.callback(account: "rita", transaction: "rt-1", customData: ritaToken))
                #expect(status == .ok, "\(json)")
                // The same token for another ad: one token, one reward.
                (status, json) = try await get(try signing.callback(account: "rita", transaction: "rt-2", customData: ritaToken))
                #expect(status == .conflict && json.errorCode == "reward_replayed", "\(json)")
                // A modified app crediting rita (or spending her cap) with its own token.
                (status, json) = try await get(try signing.callback(account: "rita", transaction: "rt-3", customData: malloryToken))
                #expect(status == .forbidden && json.errorCode == "reward_token_mismatch", "\(json)")
                // No token, junk, and a token whose payload names rita under mallory's MAC.
                (status, json) = try await get(try signing.callback(account: "rita", transaction: "rt-4"))
                #expect(status == .forbidden && json.errorCode == "invalid_reward_token", "\(json)")
                let ritaParts = ritaToken.split(separator: ".").map(String.init)
                let malloryParts = malloryToken.split(separator: ".").map(String.init)
                let spliced = [ritaParts[0], ritaParts[1], malloryParts[2]].joined(separator: ".")
                (status, json) = try await get(try signing.callback(account: "rita", transaction: "rt-5", customData: spliced))
                #expect(status == .forbidden && json.errorCode == "invalid_reward_token", "\(json)")
                // A token that had expired when the ad was watched.
                let stale = RewardTokens(tokenSecret: TestCredentials.tokenSecret).issue(accountID: "rita", now: Date().addingTimeInterval(-30 * 3600)).token
                (status, json) = try await get(try signing.callback(account: "rita", transaction: "rt-6", customData: stale))
                #expect(status == .forbidden && json.errorCode == "reward_token_expired", "\(json)")
                #expect(try await env.scalar("SELECT count(*) FROM usage_entries WHERE kind = 'reward'") == 1)

                // The client library's call.
                try await ClientTests.withFolder { folder in
                    let app = try ClientTests.client(env, port: try #require(client.port), account: "rita", folder: folder)
                    let fetched = try await app.rewardToken()
                    let (granted, grantedJSON) = try await get(try signing.callback(account: "rita", transaction: "rt-7", customData: fetched))
                    #expect(granted == .ok, "\(grantedJSON)")
                }
                #expect(try await env.scalar("SELECT count(*) FROM usage_entries WHERE kind = 'reward' AND account_id = 'rita'") == 2)
            }
        }
    }

    @Test("a key AdMob rotated in is fetched from the keys URL through libcurl when a callback needs it, at most once a minute")
    func rotatedKeyIsFetched() async throws {
        let old = SigningKey(id: 1)
        let rotated = SigningKey(id: 2)
        let file = try Self.keyFile([old])
        let served = try Self.keyFile([old, rotated])
        defer {
            try? FileManager.default.removeItem(at: file)
            try? FileManager.default.removeItem(at: served)
        }
        let port = freeTCPPort()
        let url = "http://127.0.0.1:\(port)/\(served.lastPathComponent)"
        let clock = ManualClock(start: Date())
        let keys = AdMobKeys(
            source: .init(file: file.path, url: url), addressGuard: WebhookOrderTests.loopback ?? .publicOnly, clock: clock,
            logger: Logger(label: "test"))
        // The key server is down at start: the file's key is all the service knows.
        try await keys.load()
        #expect(await keys.count == 1)

        // Then a real HTTP server on loopback serves the rotated key file.
        let server = try await Self.fileServer(port: port, serving: served, url: url)
        defer { server.terminateOrKill(polls: 250) }

        try await TestEnvironment.withFresh { env in
            try await env.application(adMobKeys: keys, adMobAdUnits: [Self.adUnit]).testLive { client in
                // Within a minute of the last fetch an unknown key id fetches nothing (a flood of
                // forged ids must not make the service hammer the key server).
                let (early, earlyJSON) = try await client.getJSON("/v1/rewards/admob?\(try rotated.callback(account: "sam", transaction: "r-1"))", credential: nil)
                #expect(early == .forbidden, "\(earlyJSON)")
                #expect(earlyJSON.errorCode == "unknown_key")
                clock.advance(by: .seconds(61))
                let (status, json) = try await client.getJSON("/v1/rewards/admob?\(try rotated.callback(account: "sam", transaction: "r-2"))", credential: nil)
                #expect(status == .ok, "\(json)")
                #expect(await keys.count == 2)
            }
        }
    }

    @Test("a key fetched from the URL that two successful fetches in a row no longer list is retired; a failed fetch counts for nothing; the file's keys stay")
    func withdrawnKeyIsRetired() async throws {
        let filed = SigningKey(id: 7)
        let withdrawn = SigningKey(id: 8)
        let kept = SigningKey(id: 9)
        let file = try Self.keyFile([filed])
        let served = try Self.keyFile([withdrawn, kept])
        let later = try Self.keyFile([kept])
        defer {
            for url in [file, served, later] { try? FileManager.default.removeItem(at: url) }
        }
        let port = freeTCPPort()
        let url = "http://127.0.0.1:\(port)/\(served.lastPathComponent)"
        var server = try await Self.fileServer(port: port, serving: served, url: url)
        defer { server.terminateOrKill(polls: 250) }

        let keys = AdMobKeys(
            source: .init(file: file.path, url: url), addressGuard: WebhookOrderTests.loopback ?? .publicOnly,
            clock: ManualClock(start: Date()), logger: Logger(label: "test"))
        try await keys.load()
        #expect(await keys.count == 3)
        // Google withdraws key 8; the file's key 7 was never listed there.
        try FileManager.default.removeItem(at: served)
        try FileManager.default.copyItem(at: later, to: served)
        await keys.refresh()
        #expect(await keys.count == 3, "retired after one fetch: a callback in flight would be refused")
        // A failed fetch (the server down) counts for nothing.
        server.terminateOrKill(polls: 250)
        await keys.refresh()
        #expect(await keys.count == 3)
        server = try await Self.fileServer(port: port, serving: served, url: url)
        await keys.refresh()
        #expect(await keys.count == 2)
        #expect(await keys.key(8) == nil)
        #expect(await keys.key(7) != nil)
        #expect(await keys.key(9) != nil)
    }

    /// A real HTTP server on loopback (Python's `http.server`) on `port`, serving the folder of
    /// `file`, once `url` answers 200. The test process blocks SIGTERM in the threads that spawn
    /// children, and a child inherits that mask: unblocked first (as Tests/Doubles/webhook-receiver.py
    /// does), or terminating it would leave the server running after the test.
    static func fileServer(port: Int, serving file: URL, url: String) async throws -> Process {
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        server.arguments = [
            try TestPackage.python(), "-c",
            """
            import runpy, signal, sys
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            sys.argv = ["http.server"] + sys.argv[1:]
            runpy.run_module("http.server", run_name="__main__")
            """,
            String(port), "--bind", "127.0.0.1", "--directory", file.deletingLastPathComponent().path,
        ]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        #expect(await waitUntil { await httpStatus(url) == 200 })
        return server
    }
}
