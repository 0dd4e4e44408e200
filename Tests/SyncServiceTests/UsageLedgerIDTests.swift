import Foundation
import HummingbirdTesting
import PropertyBased
import SyncCore
@testable import SyncService
import TestSupport
import Testing

/// A device's usage ids are namespaced by its device id in the ledger, and both may hold `:`:
/// no two (device, usage id) pairs may share a ledger id, or one device's call is counted as a
/// duplicate of another's.
@Suite("Usage: ledger ids of devices' entries")
struct UsageLedgerIDTests {
    @Test("ledger ids are one-to-one: equal exactly when device and usage id are, over ids made of a, b and :")
    func ledgerIDsAreOneToOne() async {
        // A small alphabet makes collisions of a naive concatenation likely: `a:b` + `c`, `a` + `b:c`.
        let id = Gen.int(in: 0...2).map { ["a", "b", ":"][$0] }.array(of: 1...5).map { $0.joined() }
        await propertyCheck(count: 2000, input: id, id, id, id) { device1, usage1, device2, usage2 in
            let same = UsageRequest.ledgerID(device: device1, usage: usage1) == UsageRequest.ledgerID(device: device2, usage: usage2)
            #expect(same == (device1 == device2 && usage1 == usage2), "\(device1) \(usage1) / \(device2) \(usage2)")
        }
        // Device ids without `:` keep the form they always had (their retries stay duplicates).
        #expect(UsageRequest.ledgerID(device: "phone", usage: "call:1") == "usage:phone:call:1")
    }

    @Test("two devices whose ids and usage ids meet at a colon both count")
    func colonsDoNotMerge() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application().testLive { client in
                let now = Date()
                let at = recentlyThisMonth(120, now: now)
                try await env.knownDevices(["a:b", "a"], of: "cole", since: recentlyThisMonth(600, now: now))
                let (firstStatus, first) = try await client.postJSON(
                    "/v1/accounts/cole/usage", body: try UsageAPITests.usageBody(device: "a:b", [("c", 7, at)]))
                #expect(firstStatus == .accepted, "\(first)")
                let (secondStatus, second) = try await client.postJSON(
                    "/v1/accounts/cole/usage", body: try UsageAPITests.usageBody(device: "a", [("b:c", 7, at)]))
                #expect(secondStatus == .accepted, "\(second)")
                #expect(second["accepted"] as? Int == 1, "another device's call, not a duplicate: \(second)")
                #expect(UsageAPITests.minutes(second)?["used"] as? Int == 14)
            }
        }
    }
}
