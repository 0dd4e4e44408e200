import Foundation
import Postgres
import SyncCore
import SyncStore
import Testing
import TestSupport

/// `subsync usage show`, `subsync credits adjust`, usage in `accounts show` and `reconcile`, as
/// operators run them (the built binary against a real database).
@Suite("Usage: the operator commands")
struct UsageCommandTests {
    typealias Command = SubsyncCommand

    @Test("credits adjust is audited and idempotent by id; usage show and accounts show agree on the balance")
    func adjustAndShow() async throws {
        try await TestEnvironment.withFresh { env in
            let grant = try await Command.run(
                ["credits", "adjust", "--account", "ops-1", "--units", "50", "--reason", "dropped call, ticket 1881", "--id", "t-1881"], env: env)
            #expect(grant.status == 0, "\(grant.stderr)")
            #expect(grant.stdout.contains("granted 50 minutes for ops-1 as tester"), "\(grant.stdout)")
            let retry = try await Command.run(
                ["credits", "adjust", "--account", "ops-1", "--units", "50", "--reason", "dropped call, ticket 1881", "--id", "t-1881", "--json"], env: env)
            #expect(retry.status == 0)
            #expect(retry.object["recorded"] as? Bool == false)
            let other = try await Command.run(["credits", "adjust", "--account", "ops-1", "--units", "70", "--reason", "x", "--id", "t-1881"], env: env)
            #expect(other.status == 65, "\(other.stdout) \(other.stderr)")
            let debit = try await Command.run(["credits", "adjust", "--account", "ops-1", "--units", "-20", "--reason", "duplicate grant"], env: env)
            #expect(debit.status == 0, "\(debit.stderr)")
            for bad in [
                ["credits", "adjust", "--account", "ops-1", "--units", "5"],  // no reason
                ["credits", "adjust", "--account", "ops-1", "--units", "0", "--reason", "r"],
                ["credits", "adjust", "--account", "ops-1", "--units", "5", "--reason", "r", "--meter", "sms"],
            ] {
                let output = try await Command.run(bad, env: env)
                #expect(output.status == 64, "\(bad): \(output.stdout) \(output.stderr)")
            }
            #expect(try await env.scalar("SELECT count(*) FROM usage_entries WHERE account_id = 'ops-1' AND kind = 'adjustment'") == 2)
            #expect(try await env.scalar("SELECT count(*) FROM usage_entries WHERE account_id = 'ops-1' AND actor = 'tester' AND reason = 'duplicate grant'") == 1)

            let show = try await Command.run(["usage", "show", "ops-1", "--json"], env: env)
            #expect(show.status == 0, "\(show.stderr)")
            let balance = try #require((show.object["balances"] as? [[String: Any]])?.first)
            #expect(balance["credits"] as? Int == 30)
            let text = try await Command.run(["usage", "show", "ops-1", "--period", "all"], env: env)
            #expect(text.stdout.contains("minutes: used 0 of 100, rewards 0, credits 30"), "\(text.stdout)")
            // accounts show needs something stored for the account: resolving it stores its state.
            let engine = ResolutionEngine(pool: env.pool, catalogue: .default)
            _ = try await env.pool.withTransaction { connection in
                try await engine.resolve(accounts: ["ops-1"], newReports: [:], origin: .worker, on: connection)
            }
            let account = try await Command.run(["accounts", "show", "ops-1", "--json"], env: env)
            let usage = (account.object["usage"] as? [[String: Any]])?.first
            #expect(usage?["credits"] as? Int == 30, "\(account.stdout.prefix(400)) \(account.stderr)")
        }
    }

    @Test("reconcile finds a consumable's missing credit as drift and writes it back")
    func reconcileRepairsMissingCredits() async throws {
        try await TestEnvironment.withFresh { env in
            let now = Date()
            let engine = ResolutionEngine(pool: env.pool, catalogue: .default)
            let pack = Report(
                reportID: "pack-report", deviceID: "phone", observedAt: now, productID: "voip.credits.100", originalTransactionID: "pack7",
                transactionID: "pack7", purchasedAt: now.addingTimeInterval(-600), trust: .verified(signedDate: now.addingTimeInterval(-600)))
            _ = try await ReportInbox(pool: env.pool).submit(accountID: "ops-2", device: DeviceInfo(id: "phone"), reports: [pack])
            while try await engine.resolvePendingBatch(limit: 10, maximumAttempts: 3).reportsResolved > 0 {}
            #expect(try await env.scalar("SELECT count(*) FROM usage_entries WHERE account_id = 'ops-2' AND kind = 'credit'") == 1)
            let clean = try await Command.run(["reconcile", "--account", "ops-2", "--dry-run"], env: env)
            #expect(clean.status == 0, "\(clean.stdout) \(clean.stderr)")

            try await env.pool.query("DELETE FROM usage_entries WHERE account_id = 'ops-2' AND kind = 'credit'")
            let drift = try await Command.run(["reconcile", "--account", "ops-2", "--dry-run"], env: env)
            #expect(drift.status == 2, "\(drift.stdout) \(drift.stderr)")
            #expect(drift.stdout.contains("usage of transaction pack7"), "\(drift.stdout)")
            let repair = try await Command.run(["reconcile", "--account", "ops-2"], env: env)
            #expect(repair.status == 0, "\(repair.stdout) \(repair.stderr)")
            #expect(try await env.scalar("SELECT count(*) FROM usage_entries WHERE account_id = 'ops-2' AND kind = 'credit'") == 1)
            let after = try await Command.run(["reconcile", "--account", "ops-2", "--dry-run"], env: env)
            #expect(after.status == 0, "\(after.stdout)")
        }
    }

    @Test("reconcile agrees with a pack refunded, the refund reversed and the pack refunded again; a lost reversal is drift it writes back")
    func reconcileFollowsRefundReversals() async throws {
        try await TestEnvironment.withFresh { env in
            let now = Date()
            let engine = ResolutionEngine(pool: env.pool, catalogue: .default)
            let purchased = now.addingTimeInterval(-600)
            /// The pack as the store reports it at `at`: refunded then, or (no `revoked`) standing.
            func pack(_ id: String, at: Date, revoked: Bool) -> Report {
                Report(
                    reportID: id, deviceID: "store", observedAt: at, productID: "voip.credits.100", originalTransactionID: "pack8",
                    transactionID: "pack8", purchasedAt: purchased, revokedAt: revoked ? at : nil,
                    trust: .verified(signedDate: at, source: .store))
            }
            let turns = [
                pack("bought", at: purchased, revoked: false), pack("refund", at: now.addingTimeInterval(-300), revoked: true),
                pack("reversed", at: now.addingTimeInterval(-200), revoked: false), pack("refund-2", at: now.addingTimeInterval(-100), revoked: true),
            ]
            for report in turns {
                _ = try await ReportInbox(pool: env.pool).submit(accountID: "ops-3", device: DeviceInfo(id: "store"), reports: [report])
                while try await engine.resolvePendingBatch(limit: 10, maximumAttempts: 3).reportsResolved > 0 {}
            }
            let kinds = try await env.pool.query(
                "SELECT kind FROM usage_entries WHERE account_id = 'ops-3' AND kind LIKE 'credit%' ORDER BY at, kind"
            ).map { try $0.decode(String.self, at: 0) }
            #expect(kinds == ["credit", "credit_revoked", "credit_restored", "credit_revoked"])
            let ledger = UsageLedger(pool: env.pool, catalogue: .default)
            #expect(try await ledger.balances(of: "ops-3", now: now).first?.credits == 0)

            let reconciler = Reconciler(pool: env.pool, catalogue: .default)
            #expect(try await reconciler.reconcile(accounts: ["ops-3"], repair: false).differences == [])
            try await env.pool.query("DELETE FROM usage_entries WHERE account_id = 'ops-3' AND kind = 'credit_restored'")
            #expect(try await ledger.recomputedBalances(of: "ops-3", now: now).first?.credits == -100, "the lost reversal leaves a debt")
            // The entry is lost, and the stored totals of its period no longer sum the entries.
            let drift = try await reconciler.reconcile(accounts: ["ops-3"], repair: false).differences
            #expect(drift.map(\.field).map { $0.hasPrefix("usage_totals.minutes.") ? "usage_totals" : $0 } == ["usage_entries.row", "usage_totals"], "\(drift)")
            #expect(drift.first?.recomputed == "credit_restored 100 minutes")
            #expect(drift.first?.transactionID == "pack8")
            #expect(drift.last?.stored?.contains("credits 200") == true, "\(drift)")
            #expect(drift.last?.recomputed?.contains("credits 100") == true, "\(drift)")
            _ = try await reconciler.reconcile(accounts: ["ops-3"], repair: true)
            #expect(try await reconciler.reconcile(accounts: ["ops-3"], repair: false).differences == [])
            #expect(try await ledger.balances(of: "ops-3", now: now).first?.credits == 0)
            #expect(try await ledger.recomputedBalances(of: "ops-3", now: now).first?.credits == 0)
        }
    }
}
