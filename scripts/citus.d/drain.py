#!/usr/bin/env python3
"""The resolution batches on their nodes (issue #62), run by scripts/citus after commits.py, whose
`serve` resolved nothing: a `serve` with workers (started here, from the command after `--`)
drains the reports commits.py left pending. Once the claim queue is distributed by bucket with
the accounts (sql/0047), a worker claims one bucket at a time and runs the whole batch on the
node that holds it, so that:

- every report is resolved and every queue entry claimed;
- no node records a prepared transaction while the batches commit (each commits on one node),
  and no worker node runs a statement on several shards (Citus's counters of what ran);
- the batches' statements are planned on the worker nodes, and the coordinator plans fewer
  single-shard statements than there are accounts (through the coordinator it would plan every
  statement of every batch: the claim, the locks, the reads and the writes). The `serve` runs
  no delivery loop (`SUBSYNC_DELIVERY_WORKERS=0`), so that the count is the batches': each
  loop, woken by every batch, asks the coordinator whether an endpoint is enabled (a read of
  the reference table `webhook_endpoints`), until the deliveries' step of the plan.

usage: drain.py SERVE_LOG COORDINATOR_URL NODE_URL... -- SERVE_COMMAND...
"""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from counters import multi_shard, prepared, psql, recover, single_shard  # noqa: E402

split = sys.argv.index("--")
log, coordinator, nodes, command = sys.argv[1], sys.argv[2], sys.argv[3:split], sys.argv[split + 1:]
PENDING = "SELECT count(*) FROM reports WHERE account_id LIKE 'commits-%' AND status = 'pending'"

pending = int(psql(coordinator, PENDING))
accounts = int(psql(coordinator, "SELECT count(DISTINCT account_id) FROM reports WHERE account_id LIKE 'commits-%' AND status = 'pending'"))
if pending == 0:
    sys.exit("drain: no pending report to resolve (commits.py leaves its syncs' reports pending)")
recover(nodes)
before, planned_before, fanned_before = prepared(nodes), single_shard(nodes), multi_shard(nodes)
serve = subprocess.Popen(command, stdout=open(log, "w"), stderr=subprocess.STDOUT)
try:
    deadline = time.time() + 180
    left = pending
    while left or int(psql(coordinator, "SELECT count(*) FROM account_work")):
        if serve.poll() is not None:
            sys.exit(f"drain: serve exited with {serve.returncode}")
        if time.time() > deadline:
            sys.exit(f"drain: {left} of {pending} reports still pending after 180 s")
        time.sleep(0.5)
        left = int(psql(coordinator, PENDING))
finally:
    serve.send_signal(signal.SIGTERM)
    serve.wait(timeout=60)
deltas = [a - b for a, b in zip(prepared(nodes), before)]
fanned = [a - b for a, b in zip(multi_shard(nodes), fanned_before)]
planned = [a - b for a, b in zip(single_shard(nodes), planned_before)]
resolved = int(psql(coordinator, "SELECT count(*) FROM account_states WHERE account_id LIKE 'commits-%' "
                                 "AND resolved_at > '-infinity' AND tier = 'premium'"))
print(f"drain: {pending} reports of {accounts} accounts resolved by batches on their nodes; {resolved} accounts premium; "
      f"two-phase commits {deltas}, single-shard statements planned {planned}, on several shards {fanned} by node "
      "(coordinator first)")
if resolved < accounts:
    sys.exit("drain: an account was not resolved")
if any(deltas):
    sys.exit("drain: a resolution batch committed in two phases (docs/CITUS.md, \"Scale-out: the plan\")")
if any(fanned[1:]):
    sys.exit("drain: a batch ran a statement on several shards on a worker node")
if planned[0] >= accounts or sum(planned[1:]) < 3 * accounts:
    sys.exit("drain: the batches' statements went through the coordinator, not to the worker nodes "
             "(docs/CITUS.md, \"How the pipeline runs on Citus\")")
