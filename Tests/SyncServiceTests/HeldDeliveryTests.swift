import Curl
import Foundation
import Postgres
@testable import SyncService
import SyncStore
import TestSupport
import Testing

/// Deliveries held because their endpoint's sealed secret does not open (docs/WEBHOOKS.md): the
/// real worker, receiver and PostgreSQL, on a test clock.
@Suite("Webhook deliveries held for an unreadable secret", .serialized)
struct HeldDeliveryTests {
    @Test("a delivery held for its endpoint's unreadable secret is due again a minute after its claim (a second more when the claim's lease ends on the minute): with the key put back, it goes out then")
    func heldDeliveryResumesWithinAMinute() async throws {
        let receiver = try await WebhookReceiver()
        try await TestEnvironment.withFresh { env in
            let (oldKey, newKey) = (SecretSealer.generateKey(), SecretSealer.generateKey())
            let (stranded, strandedSecret) = try await EndpointStore(pool: env.pool, sealer: try SecretSealer(keys: [oldKey])).create(url: receiver.url("/ok"))
            // The operator removed the old key without `endpoints reseal`.
            let keyRemoved = try SecretSealer(keys: [newKey])
            let keyBack = try SecretSealer(keys: [newKey, oldKey])
            let (healthy, healthySecret) = try await EndpointStore(pool: env.pool, sealer: keyRemoved).create(url: receiver.url("/ok"))
            try await receiver.setSecrets([strandedSecret.text, healthySecret.text])
            let clock = ManualClock()
            func worker(_ sealer: SecretSealer, lease: TimeInterval?) -> DeliveryWorker {
                var configuration = DeliveryWorker.Configuration()
                configuration.lease = lease
                return DeliveryWorker(
                    store: DeliveryStore(pool: env.pool, sealer: sealer),
                    client: CurlClient(configuration: .init(addressGuard: WebhookDeliveryTests.loopback ?? .publicOnly)),
                    configuration: configuration, clock: clock, logger: env.logger)
            }
            func strandedDelivery(_ account: String) async throws -> (status: String, due: Date) {
                let row = try await env.pool.query(
                    "SELECT status, next_attempt_at FROM deliveries WHERE account_id = \(account) AND endpoint_id = \(stranded.id)")[0]
                return (try row.decode(String.self, at: 0), try row.decode(Date.self, at: 1))
            }

            // The default lease (two minutes), and a lease that ends exactly a minute after the claim.
            for lease in [nil, 60] as [TimeInterval?] {
                let account = "held-\(Int(lease ?? 0))"
                // One event, due now, to each endpoint.
                try await env.pool.query(
                    """
                    INSERT INTO events (account_id, sequence, event_id, type, occurred_at, payload)
                    SELECT \(account), 1, id, 'entitlement.renewed', \(clock.now()), json_build_object('id', id, 'account_id', \(account)::text, 'sequence', 1)
                    FROM (SELECT gen_random_uuid() AS id) generated
                    """)
                try await env.pool.query(
                    """
                    INSERT INTO deliveries (account_id, endpoint_id, event_sequence, event_id, next_attempt_at)
                    SELECT account_id, endpoint, sequence, event_id, \(clock.now()) FROM events, unnest(\([stranded.id, healthy.id])::uuid[]) endpoint
                    WHERE account_id = \(account)
                    """)
                let claimedAt = clock.now()
                // Without the key: the healthy endpoint's delivery goes out, the other is held.
                #expect(try await worker(keyRemoved, lease: lease).deliverBatch() == 1)
                // And stays held through the round's record (which let go of what waits on its lease).
                #expect(try await worker(keyRemoved, lease: lease).deliverBatch() == 0, "lease \(lease ?? 0): held again at once")
                let held = try await strandedDelivery(account)
                #expect(held.status == "pending")
                let wait = held.due.timeIntervalSince(claimedAt)
                #expect(wait >= 60 && wait <= 61, "lease \(lease ?? 0): held \(wait) s, not about a minute")

                // The key is back (serve restarted with it): nothing before the minute, then it goes out.
                clock.advance(by: .seconds(59))
                #expect(try await worker(keyBack, lease: lease).deliverBatch() == 0)
                clock.advance(by: .seconds(2))
                #expect(try await worker(keyBack, lease: lease).deliverBatch() == 1, "lease \(lease ?? 0): not due again within 61 s")
                #expect(try await strandedDelivery(account).status == "succeeded")
            }
            #expect(try await env.scalar("SELECT count(*) FROM delivery_attempts") == 4, "no attempt was counted for a hold")
        }
    }
}
