import Foundation
import Postgres
import SyncCore
import SyncStore
import Testing
import TestSupport

/// The operator commands as operators and scripts run them: the built `subsync` binary.
@Suite("Operations: the subsync commands, as processes")
struct OperationsCommandTests {
    @Test("every command: --json parses, exit codes are as documented, bad arguments exit 64")
    func commands() async throws {
        try await TestEnvironment.withFresh { env in
            let r = TestReports.report
            try await OperationsFixture.ingest([
                ("ann", "iphone", r("a1", "iphone", "ann-t1", "voip.premium.monthly", -86_400, 29 * 86_400, 0, nil)),
                ("ann", "ipad", r("a2", "ipad", "ann-t1", "voip.premium.monthly", -86_400, 28 * 86_400, 5, nil)),
                ("hal", "iphone", r("h1", "iphone", "shared", "voip.basic.monthly", -86_400, 29 * 86_400, 0, nil)),
                ("ivy", "iphone", r("i1", "iphone", "shared", "voip.basic.monthly", -86_400, 29 * 86_400, 0, nil)),
            ], pool: env.pool)

            var out = try await SubsyncCommand.run(["reconcile", "--all", "--dry-run", "--json"], env: env)
            #expect(out.status == 0, "\(out.stderr)")
            #expect((out.object["summary"] as? [String: Any])?["differences"] as? Int == 0)
            #expect((out.object["differences"] as? [Any])?.count == 0)

            try await env.pool.query("UPDATE entitlements SET will_renew = false WHERE account_id = 'ann'")
            out = try await SubsyncCommand.run(["reconcile", "--account", "ann", "--dry-run", "--json"], env: env)
            #expect(out.status == 2, "drift with --dry-run exits 2: \(out.stderr)")
            let differences = (out.object["differences"] as? [[String: Any]]) ?? []
            #expect(differences.count == 1)
            #expect(differences.first?["field"] as? String == "entitlements.will_renew")
            #expect(differences.first?["stored"] as? String == "false")
            out = try await SubsyncCommand.run(["reconcile", "--all", "--dry-run"], env: env)
            #expect(out.status == 2)
            #expect(out.stdout.contains("ann  entitlement premium  entitlements.will_renew  stored false  recomputed true"))
            out = try await SubsyncCommand.run(["reconcile", "--account", "nobody"], env: env)
            #expect(out.status == 66 && out.stderr.contains("no account nobody"))
            out = try await SubsyncCommand.run(["reconcile", "--all", "--json", "--batch-size", "2"], env: env)
            #expect(out.status == 0, "\(out.stderr)")
            #expect((out.object["summary"] as? [String: Any])?["accounts_repaired"] as? Int == 1)
            out = try await SubsyncCommand.run(["reconcile", "--all", "--dry-run"], env: env)
            #expect(out.status == 0 && out.stdout.contains("no drift"))

            out = try await SubsyncCommand.run(["accounts", "show", "ann", "--json"], env: env)
            #expect(out.status == 0, "\(out.stderr)")
            let transactions = (out.object["transactions"] as? [[String: Any]]) ?? []
            let devices = ((transactions.first?["reports"] as? [[String: Any]]) ?? []).compactMap { $0["device_id"] as? String }
            #expect(devices.sorted() == ["ipad", "iphone"])
            #expect((out.object["state"] as? [String: Any])?["tier"] as? String == "premium")
            #expect(((out.object["events"] as? [Any]) ?? []).count == 2)
            out = try await SubsyncCommand.run(["accounts", "show", "ann"], env: env)
            #expect(out.status == 0 && out.stdout.contains("from device ipad"))
            out = try await SubsyncCommand.run(["accounts", "show", "nobody", "--json"], env: env)
            #expect(out.status == 66)
            out = try await SubsyncCommand.run(["accounts", "list", "--tier", "basic", "--json"], env: env)
            #expect(out.status == 0 && out.array.compactMap { $0["account_id"] as? String } == ["hal", "ivy"])
            out = try await SubsyncCommand.run(["accounts", "list", "--tier", "platinum"], env: env)
            #expect(out.status == 64)

            out = try await SubsyncCommand.run(["revoke", "--transaction", "ann-t1", "--reason", "chargeback", "--json"], env: env)
            #expect(out.status == 0, "\(out.stderr)")
            #expect(out.object["recorded"] as? Bool == true && out.object["actor"] as? String == "tester")
            #expect(out.object["account_id"] as? String == "ann" && out.object["events_written"] as? Int == 2)
            out = try await SubsyncCommand.run(["accounts", "show", "ann"], env: env)
            #expect(out.stdout.contains("revoke by tester: \"chargeback\""))
            out = try await SubsyncCommand.run(["unrevoke", "--transaction", "ann-t1", "--account", "ann", "--actor", "carol", "--json"], env: env)
            #expect(out.status == 0 && out.object["revoked"] as? Bool == false)
            out = try await SubsyncCommand.run(["unrevoke", "--transaction", "ann-t1"], env: env)
            #expect(out.status == 0 && out.stdout.contains("nothing recorded"))
            out = try await SubsyncCommand.run(["revoke", "--transaction", "shared"], env: env)
            #expect(out.status == 64 && out.stderr.contains("hal, ivy"))
            out = try await SubsyncCommand.run(["revoke", "--transaction", "nope"], env: env)
            #expect(out.status == 66)
            out = try await SubsyncCommand.run(["revoke", "--transaction", "ann-t1", "--account", "hal"], env: env)
            #expect(out.status == 66)
            out = try await SubsyncCommand.run(["revoke"], env: env)
            #expect(out.status == 64)

            out = try await SubsyncCommand.run(["events", "list", "--account", "ann", "--json"], env: env)
            #expect(out.status == 0)
            #expect(out.array.compactMap { $0["origin"] as? String }.filter { $0 == "admin" }.count == 4)
            out = try await SubsyncCommand.run(["events", "list", "--type", "entitlement.revoked", "--since", "1h"], env: env)
            #expect(out.status == 0 && out.stdout.contains("ann#"))
            out = try await SubsyncCommand.run(["events", "list", "--type", "bogus"], env: env)
            #expect(out.status == 64)
            out = try await SubsyncCommand.run(["events", "list", "--since", "yesterday"], env: env)
            #expect(out.status == 64)

            out = try await SubsyncCommand.run(["stats", "--json"], env: env)
            #expect(out.status == 0 && out.object["pending_reports"] as? Int == 0)
            #expect((out.object["accounts_by_tier"] as? [String: Int])?["basic"] == 2)
            out = try await SubsyncCommand.run(["stats", "--window", "forever"], env: env)
            #expect(out.status == 64)

            out = try await SubsyncCommand.run(["reports", "quarantined", "--json"], env: env)
            #expect(out.status == 0 && out.array.isEmpty)
            out = try await SubsyncCommand.run(["reports", "retry", "--all", "--json"], env: env)
            #expect(out.status == 0 && out.object["retried"] as? Int == 0)
            out = try await SubsyncCommand.run(["reports", "retry", "nope"], env: env)
            #expect(out.status == 66)
            out = try await SubsyncCommand.run(["reports", "retry"], env: env)
            #expect(out.status == 64)

            out = try await SubsyncCommand.run(["prune", "--reports-older-than", "1d", "--json"], env: env)
            #expect(out.status == 0 && out.object["eligible"] as? Int == 0)
            try await Task.sleep(for: .milliseconds(1100))
            out = try await SubsyncCommand.run(["prune", "--reports-older-than", "1s", "--dry-run", "--json"], env: env)
            #expect(out.status == 0, "keeping the reports the state depends on is success, for cron: \(out.stderr)")
            #expect(out.object["kept"] as? Int == 5 && out.object["deleted"] as? Int == 1)
            let text = try await SubsyncCommand.run(["prune", "--reports-older-than", "1s", "--dry-run"], env: env)
            #expect(text.status == 0 && text.stdout.contains("kept 5 reports") && text.stdout.contains("current state depends on them"), "\(text.stdout)")
            out = try await SubsyncCommand.run(["prune", "--reports-older-than", "soon"], env: env)
            #expect(out.status == 64)

            for bad in [["reconcile"], ["reconcile", "--all", "--account", "x"], ["reconcile", "--account", "x", "--resume"],
                        ["reconcile", "--all", "--batch-size", "0"], ["reconcile", "--all", "--since", "later"],
                        ["events", "list", "--limit", "0"], ["accounts", "list", "--limit", "-1"], ["accounts", "frobnicate"]] {
                let result = try await SubsyncCommand.run(bad, env: env)
                #expect(result.status == 64, "\(bad): \(result.status)")
                #expect(!result.stderr.isEmpty, "\(bad) explains itself")
            }
            out = try await SubsyncCommand.run(["stats"], env: nil)
            #expect(out.status == 64 && out.stderr.contains("no database configured"))
            for command in [["reconcile"], ["accounts", "show"], ["revoke"], ["unrevoke"], ["events", "list"], ["stats"],
                            ["reports", "retry"], ["prune"]] {
                let help = try await SubsyncCommand.run(command + ["--help"], env: nil)
                #expect(help.status == 0 && help.stdout.contains("Examples"), "\(command) --help")
            }
        }
    }

    @Test("an interrupted reconcile --all (SIGINT) saves a checkpoint, exits 130, and --resume finishes the rest")
    func interruptAndResume() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.pool.query(
                """
                INSERT INTO reports (account_id, report_id, device_id, observed_at, product_id, original_transaction_id,
                                     transaction_id, purchased_at, expires_at)
                SELECT 'acct-' || lpad(n::text, 5, '0'), 'r', 'd', now(), 'voip.basic.monthly', 't', 't',
                       now() - interval '1 day', now() + interval '20 days'
                FROM generate_series(1, 1500) AS n
                """
            )
            try await OperationsFixture.drain(env.pool)
            let running = try SubsyncCommand.start(["reconcile", "--all", "--dry-run", "--batch-size", "1", "--json"], env: env)
            // Interrupt once it has made progress (the handler is installed before the first batch).
            let started = try await waitUntil {
                try await env.pool.query("SELECT count(*) FROM reconcile_checkpoints")[0].decode(Int.self, at: 0) > 0
            }
            #expect(started)
            running.interrupt()
            let first = try await running.finish()
            #expect(first.status == 130, "\(first.stderr)")
            #expect(first.stderr.contains("--resume"))
            let summary = (first.object["summary"] as? [String: Any]) ?? [:]
            #expect(summary["complete"] as? Bool == false)
            let checkedFirst = summary["accounts_checked"] as? Int ?? 0
            #expect(checkedFirst > 0 && checkedFirst < 1500)
            let saved = try await env.pool.query("SELECT last_account_id, accounts_done FROM reconcile_checkpoints WHERE name = 'all --dry-run'")
            #expect(try saved[0].decode(Int.self, at: 1) == checkedFirst)

            let second = try await SubsyncCommand.run(["reconcile", "--all", "--dry-run", "--resume", "--json"], env: env)
            #expect(second.status == 0, "\(second.stderr)")
            let rest = (second.object["summary"] as? [String: Any]) ?? [:]
            #expect(rest["resumed_from"] as? String == (try saved[0].decode(String.self, at: 0)))
            #expect(checkedFirst + (rest["accounts_checked"] as? Int ?? 0) == 1500, "every account exactly once")
            #expect(try await env.pool.query("SELECT count(*) FROM reconcile_checkpoints")[0].decode(Int.self, at: 0) == 0)
            // Non-terminal stderr gets plain progress lines, not a redrawn bar.
            #expect(!second.stderr.contains("\r"))
        }
    }
}
