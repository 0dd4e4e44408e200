#!/usr/bin/env python3
"""Two-phase commits on a Citus cluster (issue #62), run by scripts/citus against a `serve` that
takes unsigned reports and resolves nothing (`--workers 0`): syncs from many devices at once must
commit each on one node, so that no node records a prepared transaction (pg_dist_transaction,
with the cluster's 2PC recovery off so that no record is removed). A sync's reports are one
`VALUES` insert on the account's shard and its claim queue entry is the coordinator's, which
commit in one phase (docs/CITUS.md, "Scale-out: the plan"). The resolution batches still commit
in two (one per batch, from their `INSERT … SELECT FROM unnest`); scripts/bench/citus counts
them, and this check takes them in once they commit in one.

It also checks where the syncs' statements ran: `serve` sends an account's device, reports and
snapshot to the worker node that holds it (`SUBSYNC_CITUS_ROUTING=nodes`, the default), so the
worker nodes plan at least two single-shard statements a sync and the coordinator fewer than
one (through the coordinator it would be three; Citus's `citus_stat_counters`, which
scripts/citus turns on for every node); and that the oldest pending reports are found on every
node, whose `arrival` numbers are each in a range of their own (sql/0045). Then 120 usage
writes from the same accounts: the same two checks (no prepared transaction, the statements
planned on the worker nodes).

usage: commits.py PORT ADMIN_KEY COORDINATOR_URL NODE_URL...
"""
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

port, key, coordinator, nodes = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
ACCOUNTS, SYNCS_PER_ACCOUNT, REPORTS_PER_SYNC = 60, 4, 3


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from counters import psql, recover  # noqa: E402
import counters  # noqa: E402


def call(method, path, body=None):
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", method=method, data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")
    except OSError as error:
        return None, str(error)


def prepared():
    return counters.prepared(nodes)


def single_shard():
    """Single-shard statements each node has planned (the first node is the coordinator)."""
    return counters.single_shard(nodes)


deadline = time.time() + 60
while True:
    try:
        if call("GET", "/readyz")[0] == 200:
            break
    except ValueError:
        pass
    if time.time() > deadline:
        sys.exit("commits: serve did not become ready in 60 s")
    time.sleep(0.2)

# Records of earlier distributed transactions (the trust path's bindings) are recovered now, so
# that none is removed during the count (the cluster's own recovery is off since the reload
# scripts/citus sent; a second for its maintenance daemons to read it).
time.sleep(1)
recover(nodes)
before = prepared()
planned_before = single_shard()
fanned_before = counters.multi_shard(nodes)
accepted, problems = [], []


def iso(seconds_from_now):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + seconds_from_now))


def device(account_index):
    account = f"commits-{account_index}"
    day = 86400
    for sync in range(SYNCS_PER_ACCOUNT):
        reports = [{
            "report_id": f"{account}-{sync}-{i}", "observed_at": iso(-60),
            "product_id": "voip.premium.monthly", "original_transaction_id": f"{account}-t0",
            "transaction_id": f"{account}-t{sync}", "purchased_at": iso((sync - 10) * day),
            "expires_at": iso((sync + 20) * day),
        } for i in range(REPORTS_PER_SYNC)]
        status, answer = call("POST", f"/v1/accounts/{account}/sync",
                              {"device": {"id": "phone", "platform": "ios", "app_version": "1"}, "reports": reports})
        if status != 202:
            problems.append(f"{account}: sync answered {status} {answer}")
        else:
            accepted.append(answer.get("accepted", 0))


def at_once(per_account):
    """Runs `per_account` for every account, 8 threads at once; exits on any problem it noted."""
    threads = [threading.Thread(target=lambda n=n: [per_account(i) for i in range(n, ACCOUNTS, 8)]) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if problems:
        sys.exit("commits: " + "; ".join(problems[:5]))


at_once(device)

stored = int(psql(coordinator, "SELECT count(*) FROM reports WHERE account_id LIKE 'commits-%'"))
after = prepared()
syncs = ACCOUNTS * SYNCS_PER_ACCOUNT
assert sum(accepted) == stored == syncs * REPORTS_PER_SYNC, f"accepted {sum(accepted)}, stored {stored}"
deltas = [a - b for a, b in zip(after, before)]
print(f"two-phase commits: {deltas} by node for {syncs} syncs of {stored} reports from {ACCOUNTS} accounts at once")
if any(deltas):
    sys.exit("commits: a sync committed in two phases (docs/CITUS.md, \"Scale-out: the plan\")")
# The syncs' reports were numbered by the worker nodes that inserted them, each in a range of
# its own (sql/0045): the oldest pending report and the sweeper's look for stalled ones must
# still find every node's, not only the lowest range's (nothing resolves them: --workers 0).
ranges = int(psql(coordinator, "SELECT count(DISTINCT arrival >> 48) FROM reports WHERE account_id LIKE 'commits-%'"))
# Within a second: `arrival` follows the time received only to within concurrent inserts (a
# statement that began first may draw its number second), so the lowest number may be a few
# microseconds younger than the oldest report.
oldest_ok = psql(coordinator, "SELECT abs(extract(epoch FROM subsync_oldest_pending_received_at() - "
                              "(SELECT min(received_at) FROM reports WHERE status = 'pending'))) < 1")
stalled = int(psql(coordinator, "SELECT count(DISTINCT a) FROM subsync_stalled_accounts(1000, now()) AS a WHERE a LIKE 'commits-%'"))
# With 5 reports a range, the oldest of each node's range: accounts of every node (the first
# 5 by arrival alone would all be the lowest range's).
covered = int(psql(coordinator, "SELECT count(DISTINCT r.arrival >> 48) FROM reports r WHERE r.status = 'pending' "
                                "AND r.account_id IN (SELECT a FROM subsync_stalled_accounts(5, now()) AS a)"))
print(f"oldest pending across {ranges} ranges of arrival: {oldest_ok}; stalled accounts found: {stalled} of {ACCOUNTS}, "
      f"the 5 oldest of each range on {covered} nodes")
if ranges < 2 or oldest_ok != "t" or stalled != ACCOUNTS or covered != ranges:
    sys.exit("commits: the oldest pending reports were not found on every node (sql/0045)")
planned = [a - b for a, b in zip(single_shard(), planned_before)]
print(f"single-shard statements planned: {planned} by node (coordinator first) for {syncs} syncs")
if planned[0] >= syncs or sum(planned[1:]) < 2 * syncs:
    sys.exit("commits: the syncs' statements went through the coordinator, not to the worker nodes "
             "(docs/CITUS.md, \"How the pipeline runs on Citus\")")

# An account's advisory lock (sql/0046) taken in a transaction begun on the coordinator holds
# on every node: refused from each while that transaction is open, granted after. Both forms:
# trying (a worker's batch) and waiting (the lock functions when not skipping).
def lock_holds_everywhere(taking, account, holder_says):
    """`taking` in a transaction on the coordinator must answer `holder_says` (the first word of
    its output, or None for none) and hold `account`'s lock on every node until it commits."""
    holder = subprocess.Popen(["psql", coordinator, "-qtAX", "-c", "BEGIN", "-c", taking,
                               "-c", "SELECT pg_sleep(3)", "-c", "COMMIT"], stdout=subprocess.PIPE, text=True)
    time.sleep(1.5)
    trying = f"SELECT subsync_try_account_locks(ARRAY['{account}'])"
    meanwhile = [psql(url, trying) for url in nodes]
    said = (holder.communicate()[0].split() or [None])[0]
    after = [psql(url, trying) for url in nodes]
    print(f"an account's lock taken from the coordinator by {taking}: {said}; meanwhile from each node {meanwhile}; after {after}")
    if said != holder_says or any(got != "{}" for got in meanwhile) or any(got != f"{{{account}}}" for got in after):
        sys.exit("commits: an account's advisory lock did not hold on every node (sql/0046)")


lock_holds_everywhere("SELECT subsync_try_account_locks(ARRAY['lockcheck-1'])", "lockcheck-1", "{lockcheck-1}")
lock_holds_everywhere("SELECT subsync_wait_account_lock('lockcheck-2')", "lockcheck-2", None)

# Usage writes go to the account's node too, and commit there in one phase. Nothing resolved
# these accounts, so none has a state row yet: each first write creates it under the account's
# advisory lock, taken on the account's node (sql/0046).
USAGE_PER_ACCOUNT, ENTRIES = 2, 5
usage_accepted = []
before = prepared()
planned_before = single_shard()


def usage(account_index):
    account = f"commits-{account_index}"
    for n in range(USAGE_PER_ACCOUNT):
        entries = [{"id": f"{account}-u{n}-{i}", "meter": "minutes", "units": 1 + i, "at": iso(0)} for i in range(ENTRIES)]
        status, answer = call("POST", f"/v1/accounts/{account}/usage", {"device": {"id": "phone"}, "usage": entries})
        if status != 202:
            problems.append(f"{account}: usage answered {status} {answer}")
        else:
            usage_accepted.append(answer.get("accepted", 0))


at_once(usage)
writes = ACCOUNTS * USAGE_PER_ACCOUNT
entries = int(psql(coordinator, "SELECT count(*) FROM usage_entries WHERE account_id LIKE 'commits-%' AND kind = 'usage'"))
assert sum(usage_accepted) == entries == writes * ENTRIES, f"usage accepted {sum(usage_accepted)}, stored {entries}"
deltas = [a - b for a, b in zip(prepared(), before)]
planned = [a - b for a, b in zip(single_shard(), planned_before)]
print(f"usage writes: two-phase commits {deltas}, single-shard statements planned {planned} by node for {writes} writes")
if any(deltas):
    sys.exit("commits: a usage write committed in two phases (docs/CITUS.md, \"Scale-out: the plan\")")
if planned[0] >= writes or sum(planned[1:]) < 2 * writes:
    sys.exit("commits: the usage writes went through the coordinator, not to the worker nodes")

# Neither the syncs nor the usage writes ran a statement on several shards where they ran
# (Citus's counters of what ran, inserts included; not citus.multi_task_query_log_level, which
# judges plans: a generic plan of `account_id = ANY($1)` names every shard and runs on one).
fanned = [a - b for a, b in zip(counters.multi_shard(nodes), fanned_before)]
print(f"statements on several shards during the syncs and usage writes: {fanned} by node (coordinator first)")
if any(fanned[1:]):
    sys.exit("commits: a sync or a usage write ran a statement on several shards on a worker node")
