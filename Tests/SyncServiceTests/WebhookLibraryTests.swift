import Curl
import Foundation
import Hummingbird
import Logging
import NIOCore
import Postgres
import SubsyncWebhooks
import SyncCore
import SyncService
import SyncStore
import TestSupport
import Testing

/// SubsyncWebhooks (docs/CLIENT.md) on real deliveries: a running service sends its webhooks to
/// a receiver on loopback that keeps the raw bytes, and the library verifies and orders them.
@Suite("SubsyncWebhooks against real deliveries", .serialized)
struct WebhookLibraryTests {
    /// What the receiver got: the headers and the body, byte for byte.
    actor Received {
        var deliveries: [(headers: [String: String], body: Data)] = []
        func add(_ headers: [String: String], _ body: Data) { deliveries.append((headers, body)) }
    }

    @Test("real deliveries verify and decode; a tampered body, a wrong secret and a stale timestamp are refused; a shuffled, duplicated stream comes out in order")
    func verifiesAndOrdersRealDeliveries() async throws {
        let received = Received()
        let router = Router()
        router.post("hook") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 1 << 20)
            var headers: [String: String] = [:]
            for field in request.headers { headers[field.name.canonicalName] = field.value }
            await received.add(headers, Data(buffer: body))
            return Response(status: .noContent)
        }
        let receiverPort = freeTCPPort()
        let receiver = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: receiverPort)))
        try await TestEnvironment.withFresh { env in
            let (_, secret) = try await EndpointStore(pool: env.pool).create(url: "http://127.0.0.1:\(receiverPort)/hook", eventTypes: nil)
            let port = freeTCPPort()
            try await ClientTests.serving(receiver, port: receiverPort) {
                try await ClientTests.serving(
                    env.application(deliveryWorkers: 1, webhookGuard: WebhookDeliveryTests.loopback, port: port), port: port
                ) {
                    let client = CurlClient(configuration: .init(addressGuard: WebhookDeliveryTests.loopback ?? .publicOnly))
                    defer { client.shutdown() }
                    for account in ["wa", "wb"] {
                        for (index, body) in [
                            try SyncBody(device: "phone", reports: [TestReports.report("\(account)-1")]).data,
                            try SyncBody(device: "phone", reports: [TestReports.report("\(account)-2", revoked: 0)]).data,
                        ].enumerated() {
                            let response = try await client.execute(CurlRequest(
                                url: "http://127.0.0.1:\(port)/v1/accounts/\(account)/sync?wait_ms=60000", method: "POST",
                                headers: [("Authorization", "Bearer \(TestCredentials.adminKey)"), ("Content-Type", "application/json")],
                                body: Array(body), totalTimeout: .seconds(300)))
                            #expect(response.status == 202, "sync \(index) of \(account)")
                        }
                    }
                    // A free account's minutes: 95 of 100 gives usage.low.
                    let usage = try UsageAPITests.usageBody(device: "phone", [("c1", 95, recentlyThisMonth(60))])
                    let response = try await client.execute(CurlRequest(
                        url: "http://127.0.0.1:\(port)/v1/accounts/wc/usage", method: "POST",
                        headers: [("Authorization", "Bearer \(TestCredentials.adminKey)"), ("Content-Type", "application/json")],
                        body: Array(usage), totalTimeout: .seconds(300)))
                    #expect(response.status == 202)
                    let events = try await env.scalar("SELECT count(*) FROM events")
                    #expect(events >= 6)
                    let arrived = await waitUntil(seconds: 300) { await received.deliveries.count >= events }
                    let count = await received.deliveries.count
                    #expect(arrived, "\(count) of \(events) deliveries arrived")
                }
            }
            let deliveries = await received.deliveries
            let verifier = try WebhookVerifier(secrets: [secret.text])
            var verified: [WebhookEvent] = []
            var seen: Set<String> = []
            for (headers, body) in deliveries {
                // Each at the time it was sent (a busy core may take minutes to get here); a
                // delivery sent twice (at least once) counts once.
                let stamp = try #require(headers["webhook-timestamp"].flatMap(Double.init))
                let delivery = try verifier.verify(body: body, headers: headers, now: Date(timeIntervalSince1970: stamp))
                guard seen.insert(delivery.id).inserted else { continue }
                #expect(delivery.id == headers["webhook-id"])
                #expect(delivery.event.id == delivery.id)
                verified.append(delivery.event)
            }
            // What the library decoded is what the database holds.
            let stored = try await env.pool.query("SELECT event_id::text, account_id, sequence, type FROM events ORDER BY account_id, sequence")
                .map { (try $0.decode(String.self, at: 0), try $0.decode(String.self, at: 1), try $0.decode(Int64.self, at: 2), try $0.decode(String.self, at: 3)) }
            let decoded = verified.sorted { ($0.accountID, $0.sequence) < ($1.accountID, $1.sequence) }
            #expect(decoded.map(\.id) == stored.map(\.0))
            #expect(decoded.map(\.type.rawValue) == stored.map(\.3))
            #expect(decoded.contains { $0.type == .usageLow && $0.usage?.available == 5 })
            #expect(decoded.contains { $0.type == .revoked && $0.current?.status == .revoked })

            // Refusals, each at the delivery's own time: on a busy core the test may get here
            // more than the tolerance after it was sent, and then the timestamp would be refused
            // before the signature is looked at.
            let (headers, body) = try #require(deliveries.first)
            let stamp = try #require(headers["webhook-timestamp"])
            let sent = Date(timeIntervalSince1970: try #require(Double(stamp)))
            var tampered = body
            tampered[tampered.count / 2] ^= 0x01
            #expect(throws: WebhookVerificationError.noMatchingSignature) { try verifier.verify(body: tampered, headers: headers, now: sent) }
            let stranger = try WebhookVerifier(secrets: ["whsec_" + Data(repeating: 7, count: 24).base64EncodedString()])
            #expect(throws: WebhookVerificationError.noMatchingSignature) { try stranger.verify(body: body, headers: headers, now: sent) }
            #expect(throws: WebhookVerificationError.timestampOutOfTolerance(seconds: 301)) {
                try verifier.verify(body: body, headers: headers, now: sent.addingTimeInterval(301))
            }

            // A shuffled, duplicated stream comes out in order, each event once.
            var generator = SeededGenerator(seed: 20_261_124)
            let stream = (verified + verified.filter { _ in Bool.random(using: &generator) }).shuffled(using: &generator)
            var orderer = EventOrderer()
            var applied: [String: [Int64]] = [:]
            var duplicates = 0
            for event in stream {
                switch orderer.receive(event) {
                case .ready(let events): for event in events { applied[event.accountID, default: []].append(event.sequence) }
                case .duplicate: duplicates += 1
                case .buffered, .stale: break
                case .full: Issue.record("the buffer of 10,000 filled with \(stream.count) events")
                }
            }
            #expect(duplicates == stream.count - verified.count)
            for account in ["wa", "wb", "wc"] {
                let count = Int64(stored.filter { $0.1 == account }.count)
                #expect(applied[account] == Array(1...count), "\(account): \(applied[account] ?? [])")
            }
            #expect(orderer.gaps().isEmpty)
        }
    }
}
