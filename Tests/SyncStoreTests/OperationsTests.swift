import Foundation
import Postgres
import SyncCore
import SyncStore
import Testing
import TestSupport

@Suite("Operations: reconcile")
struct ReconcileTests {
    @Test("dry run finds exactly the injected drift and changes nothing; repair fixes it with reconcile events; a second run finds nothing")
    func injectedDrift() async throws {
        try await TestEnvironment.withFresh { env in
            try await OperationsFixture.addEndpoint(env.pool)
            let r = TestReports.report
            try await OperationsFixture.ingest([
                ("ann", "iphone", r("a1", "iphone", "t1", "voip.premium.monthly", -86_400, 29 * 86_400, 0, nil)),
                ("ann", "ipad", r("a2", "ipad", "t1", "voip.premium.monthly", -86_400, 20 * 86_400, 10, nil)),
                ("bob", "iphone", r("b1", "iphone", "t1", "voip.basic.monthly", -86_400, 29 * 86_400, 0, nil)),
                ("cat", "iphone", r("c1", "iphone", "t1", "voip.premium.monthly", -86_400, 29 * 86_400, 0, nil)),
                ("cat", "mac", r("c2", "mac", "t1", "voip.premium.monthly", -86_400, 29 * 86_400, 5, -3_600)),
                ("dan", "iphone", r("d1", "iphone", "t1", "voip.business.yearly", -86_400, 300 * 86_400, 0, nil)),
            ], pool: env.pool)
            let reconciler = Reconciler(pool: env.pool, catalogue: .default)
            let accounts = try await OperationsFixture.allAccounts(reconciler)
            #expect(accounts == ["ann", "bob", "cat", "dan"])
            let healthy = try await reconciler.reconcile(accounts: accounts, repair: false)
            #expect(healthy.differences == [], "a healthy database has no drift")

            // 1. ann: an expiry changed (JSON and column alike).
            try await env.pool.query(
                """
                UPDATE transactions SET expires_at = '2031-01-01T00:00:00Z',
                    aggregate = jsonb_set(aggregate::jsonb, '{expires_at}', '"2031-01-01T00:00:00.000000Z"')
                WHERE account_id = 'ann' AND transaction_id = 't1'
                """
            )
            // 2. bob: the state row is lost.
            try await env.pool.query("DELETE FROM account_states WHERE account_id = 'bob'")
            // 3. cat: the revocation flipped, as a buggy writer would: aggregate and state agree
            //    that t1 is not revoked (and that state was "announced" with a worker event).
            let engine = ResolutionEngine(pool: env.pool, catalogue: .default)
            let stored = try await env.pool.query("SELECT aggregate FROM transactions WHERE account_id = 'cat'")
            var flipped = try stored[0].decode(JSONColumn<TransactionAggregate>.self, at: 0).value
            flipped.storeRevocation = nil
            let tampered = TransactionLedger([flipped])
            _ = try await env.pool.withTransaction { connection in
                try await engine.resolve(accounts: ["cat"], replacingAggregatesWith: ["cat": tampered], origin: .worker, on: connection)
            }
            let catBefore = try await env.pool.query("SELECT tier FROM account_states WHERE account_id = 'cat'")
            #expect(try catBefore[0].decode(String.self, at: 0) == "premium")

            let before = try await OperationsFixture.fingerprint(env.pool)
            let dry = try await reconciler.reconcile(accounts: accounts, repair: false)
            #expect(try await OperationsFixture.fingerprint(env.pool) == before, "a dry run changes nothing")
            #expect(dry.accountsWithDrift == 3)
            let keys = OperationsFixture.keys(dry.differences)
            #expect(keys.contains("ann|transaction|t1|expires_at"))
            #expect(keys.contains("bob|account|-|row"))
            #expect(keys.contains("cat|transaction|t1|revocation"))
            #expect(keys.contains("cat|entitlement|premium|status"))
            #expect(keys.contains("cat|account|-|tier"))
            // Only those accounts and those kinds of fields: ann's state never depended on the
            // later expiry... it did (last-expiry-wins), so its entitlement expiry is wrong too.
            #expect(Set(dry.differences.map(\.accountID)) == ["ann", "bob", "cat"])
            #expect(!keys.contains { $0.hasPrefix("ann|entitlement") }, "ann's state was resolved before the change: only the aggregate drifted")
            let annExpiry = dry.differences.first { $0.accountID == "ann" && $0.field == "expires_at" }
            #expect(annExpiry?.stored == "2031-01-01T00:00:00Z")
            #expect(annExpiry?.recomputed == RFC3339.format(TestReports.start.addingTimeInterval(29 * 86_400)))
            let catRevocation = dry.differences.first { $0.accountID == "cat" && $0.field == "revocation" }
            #expect(catRevocation?.stored == nil && catRevocation?.recomputed?.contains("\"report_id\":\"c2\"") == true)

            let repaired = try await reconciler.reconcile(accounts: accounts, repair: true)
            #expect(repaired.accountsRepaired == 3)
            #expect(OperationsFixture.keys(repaired.differences) == keys)
            // cat's consumers were told "restored"; now they are told "revoked", by reconcile.
            let events = try await env.pool.query(
                "SELECT type, origin FROM events WHERE account_id = 'cat' ORDER BY sequence DESC LIMIT 2"
            ).map { "\(try $0.decode(String.self, at: 0))/\(try $0.decode(String.self, at: 1))" }
            #expect(events.sorted() == ["account.tier_changed/reconcile", "entitlement.revoked/reconcile"])
            let deliveries = try await env.pool.query(
                "SELECT count(*) FROM deliveries d JOIN events e ON e.account_id = d.account_id AND e.sequence = d.event_sequence WHERE e.origin = 'reconcile'"
            )
            #expect(try deliveries[0].decode(Int.self, at: 0) == 2, "reconcile events go out through the outbox")
            // bob's row is back with its event counter, and no event repeats what consumers knew.
            let bob = try await env.pool.query("SELECT tier, last_sequence FROM account_states WHERE account_id = 'bob'")
            #expect(try bob[0].decode(String.self, at: 0) == "basic")
            #expect(try bob[0].decode(Int64.self, at: 1) == 2)
            #expect(try await env.count("events", accountID: "bob") == 2)

            let again = try await reconciler.reconcile(accounts: accounts, repair: false)
            #expect(again.differences == [], "\(again.differences)")
            #expect(try await reconciler.reconcile(accounts: accounts, repair: true).accountsRepaired == 0)
        }
    }

    @Test("column copies and the event counter are checked too, once per wrong value")
    func columnCopies() async throws {
        try await TestEnvironment.withFresh { env in
            let r = TestReports.report
            try await OperationsFixture.ingest([("eve", "iphone", r("e1", "iphone", "t1", "voip.premium.monthly", -86_400, 29 * 86_400, 0, nil))], pool: env.pool)
            try await env.pool.query("UPDATE transactions SET revoked = true WHERE account_id = 'eve'")
            try await env.pool.query("UPDATE entitlements SET status = 'expired' WHERE account_id = 'eve'")
            try await env.pool.query("UPDATE account_states SET last_sequence = 0, next_transition_at = NULL WHERE account_id = 'eve'")
            let reconciler = Reconciler(pool: env.pool, catalogue: .default)
            let dry = try await reconciler.reconcile(accounts: ["eve"], repair: false)
            #expect(OperationsFixture.keys(dry.differences) == [
                "eve|account|-|account_states.last_sequence",
                "eve|account|-|account_states.next_transition_at",
                "eve|entitlement|premium|entitlements.status",
                "eve|transaction|t1|transactions.revoked",
            ])
            _ = try await reconciler.reconcile(accounts: ["eve"], repair: true)
            #expect(try await reconciler.reconcile(accounts: ["eve"], repair: false).differences == [])
            // The next event continues after the existing ones.
            let sequences = try await env.pool.query("SELECT last_sequence FROM account_states WHERE account_id = 'eve'")
            #expect(try sequences[0].decode(Int64.self, at: 0) == 2)
        }
    }

    @Test("time passing since the last resolution is not drift")
    func timeIsNotDrift() async throws {
        try await TestEnvironment.withFresh { env in
            // Expires one second after resolution; the sweeper is not running; reconcile runs
            // half a second after the expiry, on the same clock.
            let clock = ManualClock(start: TestReports.start)
            let r = TestReports.report
            try await OperationsFixture.ingest([("fay", "iphone", r("f1", "iphone", "t1", "voip.premium.monthly", -86_400, 1, 0, nil))], pool: env.pool, clock: clock)
            clock.advance(by: .milliseconds(1500))
            let reconciler = Reconciler(pool: env.pool, catalogue: .default, clock: clock)
            #expect(try await reconciler.reconcile(accounts: ["fay"], repair: false).differences == [])
            // It would be drift if the stored state said something else than the reports do.
            try await env.pool.query(
                "UPDATE account_states SET state = jsonb_set(state::jsonb, '{ads}', to_jsonb(NOT (state->>'ads')::boolean)) WHERE account_id = 'fay'")
            #expect(try await reconciler.reconcile(accounts: ["fay"], repair: false).differences.isEmpty == false)
        }
    }

    @Test("reconcile repairing concurrently with live workers and new reports ends consistent, without false drift")
    func concurrentWithWorkers() async throws {
        try await TestEnvironment.withFresh(poolSize: 16) { env in
            let reports = TestReports.randomReports(accounts: 30, perAccount: 10, seed: 11)
            let (first, second) = (Array(reports.prefix(150)), Array(reports.dropFirst(150)))
            try await OperationsFixture.ingest(first, pool: env.pool)
            // Drift on a few accounts before the storm.
            // (A lost state row is left out here: a worker that meets it before the repair fails
            // on the event sequence and quarantines reports, which is what reconcile is for but
            // would make this test about timing.)
            try await env.pool.query(
                "UPDATE account_states SET state = jsonb_set(state::jsonb, '{ads}', to_jsonb(NOT (state->>'ads')::boolean)) WHERE account_id IN ('acct-1', 'acct-2')"
            )
            try await env.pool.query("UPDATE transactions SET aggregate = jsonb_set(aggregate::jsonb, '{is_upgraded}', 'true') WHERE account_id = 'acct-3'")
            let reconciler = Reconciler(pool: env.pool, catalogue: .default)
            let engine = ResolutionEngine(pool: env.pool, catalogue: .default)
            let inbox = ReportInbox(pool: env.pool)
            let falseDrift = try await withThrowingTaskGroup(of: Int.self) { group in
                group.addTask {  // devices
                    for item in second {
                        _ = try await inbox.submit(accountID: item.account, device: DeviceInfo(id: item.device), reports: [item.report])
                    }
                    return 0
                }
                for _ in 0..<2 {  // workers
                    group.addTask {
                        for _ in 0..<200 {
                            _ = try await engine.resolvePendingBatch(limit: 5)
                            try await Task.sleep(for: .milliseconds(2))
                        }
                        return 0
                    }
                }
                group.addTask {  // an operator reconciling in a loop
                    var repairedUnexpected = 0
                    for round in 0..<6 {
                        let accounts = try await OperationsFixture.allAccounts(reconciler)
                        let result = try await reconciler.reconcile(accounts: accounts, repair: true)
                        if round > 0 { repairedUnexpected += result.accountsRepaired }
                    }
                    return repairedUnexpected
                }
                var total = 0
                for try await value in group { total += value }
                return total
            }
            #expect(falseDrift == 0, "after the first repair, concurrent worker commits never look like drift")
            try await OperationsFixture.drain(env.pool)
            let accounts = try await OperationsFixture.allAccounts(reconciler)
            #expect(accounts.count == 30)
            let final = try await reconciler.reconcile(accounts: accounts, repair: false)
            #expect(final.differences == [], "\(final.differences.prefix(5))")
            // And the state equals a resolution of all reports from scratch (at its own instant).
            for (account, items) in Dictionary(grouping: reports, by: \.account) {
                let rows = try await env.pool.query("SELECT aggregate FROM transactions WHERE account_id = \(account) ORDER BY transaction_id")
                let aggregates = try rows.map { try $0.decode(JSONColumn<TransactionAggregate>.self, at: 0).value }
                #expect(aggregates == TransactionAggregate.aggregate(items.map(\.report)), "\(account)")
            }
            let gaps = try await env.pool.query(
                """
                SELECT e.account_id FROM events e JOIN account_states s USING (account_id)
                GROUP BY e.account_id, s.last_sequence
                HAVING count(*) <> max(e.sequence) OR max(e.sequence) <> s.last_sequence
                """
            )
            #expect(gaps.count == 0, "event sequences stay gap-free")
        }
    }
}

@Suite("Operations: prune, revoke, quarantine")
struct OperationsStoreTests {
    @Test("the witnesses of a transaction join to its aggregate, on random report sets")
    func witnessesJoinToAggregate() {
        let reports = TestReports.randomReports(accounts: 60, perAccount: 14, seed: 5).map(\.report)
        for (_, group) in Dictionary(grouping: reports, by: \.transactionID) {
            var group = group
            // Some verified and admin reports, so every field has contenders.
            for index in group.indices where index % 5 == 1 {
                group[index].trust = .verified(signedDate: group[index].observedAt)
            }
            if group.count > 3 { group[2].trust = .admin(.unrevoke, at: group[2].observedAt) }
            if group.count > 4 { group[3].isUpgraded = true }
            // Renewal details, signed or not, on reports that are not the representative.
            for index in group.indices where index % 4 == 2 {
                group[index].renewal = RenewalDetails(
                    expirationReason: index % 8 == 2 ? .billingError : nil, renewalProductID: "voip.premium.yearly",
                    signedAt: index % 3 == 0 ? nil : group[index].observedAt.addingTimeInterval(Double(index)))
            }
            let needed = Pruner.witnesses(of: group)
            #expect(needed.count <= 9)
            #expect(needed.count < group.count || group.count <= 9, "every report kept: a witness is missing")
            let kept = group.filter { needed.contains($0.reportID) }
            #expect(TransactionAggregate.aggregate(kept) == TransactionAggregate.aggregate(group))
        }
    }

    @Test("prune keeps what the state depends on: reconcile finds no drift after it; --force does")
    func pruneKeepsReconcileZeroDrift() async throws {
        try await TestEnvironment.withFresh { env in
            let reports = TestReports.randomReports(accounts: 20, perAccount: 15, seed: 3)
            try await OperationsFixture.ingest(reports, pool: env.pool)
            try await env.pool.query("INSERT INTO reports (account_id, report_id, device_id, observed_at, product_id, original_transaction_id, transaction_id, purchased_at) VALUES ('acct-0', 'pending-1', 'd', now(), 'voip.basic.monthly', 'tp', 'tp', now())")
            let reconciler = Reconciler(pool: env.pool, catalogue: .default)
            let accounts = try await OperationsFixture.allAccounts(reconciler)
            let pruner = Pruner(pool: env.pool)
            let cutoff = Date().addingTimeInterval(3600)

            let dry = try await pruner.prune(before: cutoff, force: false, dryRun: true, batchSize: 7)
            #expect(dry.eligible == reports.count)
            #expect(try await env.pool.query("SELECT count(*) FROM reports")[0].decode(Int.self, at: 0) == reports.count + 1)

            let pruned = try await pruner.prune(before: cutoff, force: false, dryRun: false, batchSize: 7)
            #expect(pruned.deleted == dry.deleted && pruned.kept == dry.kept)
            #expect(pruned.deleted > 0 && pruned.kept > 0 && pruned.deleted + pruned.kept == reports.count)
            let remaining = try await env.pool.query("SELECT count(*) FROM reports WHERE status = 'resolved'")[0].decode(Int.self, at: 0)
            #expect(remaining == pruned.kept)
            #expect(try await env.pool.query("SELECT count(*) FROM reports WHERE status = 'pending'")[0].decode(Int.self, at: 0) == 1)
            #expect(try await reconciler.reconcile(accounts: accounts, repair: false).differences == [], "zero drift after a prune")
            // Pruning again removes nothing more: what is left is exactly what is needed.
            #expect(try await pruner.prune(before: cutoff, force: false, dryRun: false).deleted == 0)

            let forced = try await pruner.prune(before: cutoff, force: true, dryRun: false)
            #expect(forced.deleted == pruned.kept && forced.kept == 0)
            #expect(try await reconciler.reconcile(accounts: accounts, repair: false).accountsWithDrift > 0)
        }
    }

    @Test("an operator's revoke after an unrevoke from a host whose clock ran a day fast still revokes")
    func operatorDecisionsKeepTheirOrderAcrossHostClocks() async throws {
        try await TestEnvironment.withFresh { env in
            let r = TestReports.report
            try await OperationsFixture.ingest([
                ("kit", "iphone", r("k1", "iphone", "k-t1", "voip.premium.monthly", -86_400, 29 * 86_400, 0, nil)),
            ], pool: env.pool)
            let onTime = AdminOverride(pool: env.pool, catalogue: .default)
            let fast = AdminOverride(pool: env.pool, catalogue: .default, clock: ManualClock(start: Date().addingTimeInterval(86_400)))
            // Support lifts a revoke from a host a day ahead; hours later fraud is confirmed and an
            // operator on a correct host revokes again.
            #expect(try await onTime.apply(.revoke, transactionID: "k-t1", accountID: "kit", actor: "a", reason: nil).revoked)
            #expect(try await fast.apply(.unrevoke, transactionID: "k-t1", accountID: "kit", actor: "b", reason: nil).revoked == false)
            let again = try await onTime.apply(.revoke, transactionID: "k-t1", accountID: "kit", actor: "c", reason: "fraud")
            #expect(again.recorded && again.revoked, "\(again)")
            let tier = try await env.pool.query("SELECT tier FROM account_states WHERE account_id = 'kit'")
            #expect(try tier[0].decode(String.self, at: 0) == "free")
            // And the other way: an unrevoke from a host that lags the revoke it lifts.
            let slow = AdminOverride(pool: env.pool, catalogue: .default, clock: ManualClock(start: Date().addingTimeInterval(-86_400)))
            let lifted = try await slow.apply(.unrevoke, transactionID: "k-t1", accountID: "kit", actor: "d", reason: nil)
            #expect(lifted.recorded && !lifted.revoked, "\(lifted)")
            // A revoke from the fast host, an unrevoke from a correct one, then the user's refund:
            // the unrevoke did not reach past the refund (both are dated by the database).
            #expect(try await fast.apply(.revoke, transactionID: "k-t1", accountID: "kit", actor: "e", reason: nil).revoked)
            #expect(try await onTime.apply(.unrevoke, transactionID: "k-t1", accountID: "kit", actor: "f", reason: nil).revoked == false)
            let refundedAt = Date().timeIntervalSince(TestReports.start) + 2
            try await OperationsFixture.ingest([
                ("kit", "iphone", r("k2", "iphone", "k-t1", "voip.premium.monthly", -86_400, 29 * 86_400, refundedAt, refundedAt)),
            ], pool: env.pool)
            let refunded = try await env.pool.query("SELECT tier FROM account_states WHERE account_id = 'kit'")
            #expect(try refunded[0].decode(String.self, at: 0) == "free")
            let check = try await Reconciler(pool: env.pool, catalogue: .default).reconcile(accounts: ["kit"], repair: false)
            #expect(check.differences == [], "\(check.differences)")
        }
    }

    @Test("an unrevoke lifts the refund it saw, not one made before it but reported after it")
    func unrevokeLiftsOnlyTheRefundItSaw() async throws {
        try await TestEnvironment.withFresh { env in
            let r = TestReports.report
            try await OperationsFixture.ingest([
                ("lou", "iphone", r("l1", "iphone", "l-t1", "voip.premium.monthly", -86_400, 29 * 86_400, 0, nil)),
            ], pool: env.pool)
            let admin = AdminOverride(pool: env.pool, catalogue: .default)
            // Fraud: revoked; the user appeals and support unrevokes.
            #expect(try await admin.apply(.revoke, transactionID: "l-t1", accountID: "lou", actor: "a", reason: "fraud").revoked)
            #expect(try await admin.apply(.unrevoke, transactionID: "l-t1", accountID: "lou", actor: "b", reason: nil).revoked == false)
            // Meanwhile the user had been refunded by Apple (before the unrevoke); it arrives now.
            let refundedAt = Date().addingTimeInterval(-60).timeIntervalSince(TestReports.start)
            let now = Date().timeIntervalSince(TestReports.start)
            try await OperationsFixture.ingest([
                ("lou", "iphone", r("l2", "iphone", "l-t1", "voip.premium.monthly", -86_400, 29 * 86_400, now, refundedAt)),
            ], pool: env.pool)
            let tier = try await env.pool.query("SELECT tier FROM account_states WHERE account_id = 'lou'")
            #expect(try tier[0].decode(String.self, at: 0) == "free", "the refund was lifted by an unrevoke that never saw it")
            // An unrevoke now sees that refund and lifts it.
            #expect(try await admin.apply(.unrevoke, transactionID: "l-t1", accountID: "lou", actor: "c", reason: nil).revoked == false)
            let check = try await Reconciler(pool: env.pool, catalogue: .default).reconcile(accounts: ["lou"], repair: false)
            #expect(check.differences == [], "\(check.differences)")
        }
    }

    @Test("revoke and unrevoke record audited admin reports and resolve at once with admin events")
    func adminOverride() async throws {
        try await TestEnvironment.withFresh { env in
            try await OperationsFixture.addEndpoint(env.pool)
            let r = TestReports.report
            try await OperationsFixture.ingest([
                ("gus", "iphone", r("g1", "iphone", "t1", "voip.premium.monthly", -86_400, 29 * 86_400, 0, nil)),
                ("hal", "iphone", r("h1", "iphone", "shared", "voip.basic.monthly", -86_400, 29 * 86_400, 0, nil)),
                ("ivy", "iphone", r("i1", "iphone", "shared", "voip.basic.monthly", -86_400, 29 * 86_400, 0, nil)),
            ], pool: env.pool)
            let admin = AdminOverride(pool: env.pool, catalogue: .default)
            let revoked = try await admin.apply(.revoke, transactionID: "t1", accountID: nil, actor: "alice", reason: "chargeback")
            #expect(revoked.accountID == "gus" && revoked.recorded && revoked.revoked)
            #expect(revoked.eventsWritten == 2)
            let report = try await env.pool.query(
                "SELECT source, admin_action, admin_actor, admin_reason, status, product_id FROM reports WHERE account_id = 'gus' AND report_id = \(revoked.reportID ?? "")"
            )[0]
            #expect(try report.decode(String.self, at: 0) == "admin")
            #expect(try report.decode(String.self, at: 1) == "revoke")
            #expect(try report.decode(String.self, at: 2) == "alice")
            #expect(try report.decode(String.self, at: 3) == "chargeback")
            #expect(try report.decode(String.self, at: 4) == "resolved")
            #expect(try report.decode(String.self, at: 5) == "voip.premium.monthly")
            let events = try await env.pool.query("SELECT type FROM events WHERE account_id = 'gus' AND origin = 'admin' ORDER BY sequence")
                .map { try $0.decode(String.self, at: 0) }
            #expect(events == ["entitlement.revoked", "account.tier_changed"])
            #expect(try await env.count("deliveries", accountID: "gus") == 4)

            let again = try await admin.apply(.revoke, transactionID: "t1", accountID: "gus", actor: "alice", reason: nil)
            #expect(!again.recorded)
            let restored = try await admin.apply(.unrevoke, transactionID: "t1", accountID: nil, actor: "bob", reason: "mistake")
            #expect(restored.recorded && !restored.revoked)
            let tier = try await env.pool.query("SELECT tier FROM account_states WHERE account_id = 'gus'")
            #expect(try tier[0].decode(String.self, at: 0) == "premium")
            // Reconcile agrees with what the commands did.
            let reconciler = Reconciler(pool: env.pool, catalogue: .default)
            let check = try await reconciler.reconcile(accounts: ["gus"], repair: false)
            #expect(check.differences == [], "\(check.differences)")

            await #expect(throws: AdminOverride.Failure.ambiguous(transactionID: "shared", accounts: ["hal", "ivy"])) {
                _ = try await admin.apply(.revoke, transactionID: "shared", accountID: nil, actor: "a", reason: nil)
            }
            await #expect(throws: AdminOverride.Failure.notFound(transactionID: "nope", accountID: nil)) {
                _ = try await admin.apply(.revoke, transactionID: "nope", accountID: nil, actor: "a", reason: nil)
            }
            await #expect(throws: AdminOverride.Failure.notFound(transactionID: "t1", accountID: "hal")) {
                _ = try await admin.apply(.revoke, transactionID: "t1", accountID: "hal", actor: "a", reason: nil)
            }
        }
    }

    @Test("quarantined reports are listed and put back in the inbox")
    func quarantine() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.pool.query(
                """
                INSERT INTO reports (account_id, report_id, device_id, observed_at, product_id, original_transaction_id,
                                     transaction_id, purchased_at, status, attempts, last_error)
                VALUES ('jo', 'q1', 'd', now(), 'voip.basic.monthly', 't', 't', now() - interval '1 day', 'quarantined', 5, 'boom'),
                       ('jo', 'q2', 'd', now(), 'voip.basic.monthly', 't', 't', now() - interval '1 day', 'quarantined', 5, 'boom'),
                       ('kim', 'q1', 'd', now(), 'voip.basic.monthly', 't', 't', now() - interval '1 day', 'quarantined', 5, 'boom')
                """
            )
            let store = QuarantinedReports(pool: env.pool)
            #expect(try await store.list(accountID: nil, limit: 10).count == 3)
            #expect(try await store.list(accountID: "jo", limit: 10).map(\.reportID) == ["q1", "q2"])
            await #expect(throws: QuarantinedReports.Failure.ambiguous(reportID: "q1", accounts: ["jo", "kim"])) {
                _ = try await store.retry(reportID: "q1", accountID: nil)
            }
            #expect(try await store.retry(reportID: "q2", accountID: nil) == 1)
            #expect(try await store.retry(reportID: nil, accountID: "jo") == 1)
            await #expect(throws: QuarantinedReports.Failure.notFound(reportID: "zz")) {
                _ = try await store.retry(reportID: "zz", accountID: nil)
            }
            let pending = try await env.pool.query("SELECT count(*) FROM reports WHERE status = 'pending' AND attempts = 0 AND last_error IS NULL")
            #expect(try pending[0].decode(Int.self, at: 0) == 2)
        }
    }
}
