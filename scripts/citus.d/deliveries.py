#!/usr/bin/env python3
"""The delivery claims on their nodes (issue #62), run by scripts/citus after drain.py: an
endpoint on a receiver of this script's own is given a delivery of every event the drain wrote,
each account noted as due in its bucket (`delivery_work`, sql/0048) as a transaction on its node
that writes deliveries notes it, and a `serve` with delivery loops only (started here, from the
command after `--`) sends them. A claim takes one bucket's due accounts on the node that holds
them and claims their deliveries there; each shard's attempts are recorded there too
(docs/CITUS.md, "How the pipeline runs on Citus"), so that:

- every delivery succeeds, each reaching the receiver with a signature that verifies;
- no node records a prepared transaction, and no worker node runs a statement on several
  shards: a claim and a record commit on one node each;
- the claims' and records' statements are planned on the worker nodes: the coordinator plans
  fewer single-shard statements than there are deliveries, and every account's row is gone
  once its deliveries are done.

Then ten more events are given deliveries without a row in `delivery_work` (as a lost row would
leave them): the loops' hold notes their accounts due, and they are delivered too. Last, an
operator's `subsync replay` of every event to the endpoint, which writes from the coordinator and
notes the accounts due itself: every replayed delivery is delivered. Finally, with `serve`
stopped, `subsync distribute` run again notes due the accounts of pending deliveries that have no
row (an upgrade to sql/0048).

usage: deliveries.py SERVE_LOG COORDINATOR_URL NODE_URL... -- SERVE_COMMAND...
"""
import base64
import hashlib
import hmac
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from counters import multi_shard, prepared, psql, recover, single_shard  # noqa: E402

split = sys.argv.index("--")
log, coordinator, nodes, command = sys.argv[1], sys.argv[2], sys.argv[3:split], sys.argv[split + 1:]
key = secrets.token_bytes(32)
received, bad = set(), []
lock = threading.Lock()


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        # docs/WEBHOOKS.md: "v1," + base64 HMAC-SHA256 of "{id}.{timestamp}.{body}", space separated.
        webhook_id, timestamp = self.headers.get("webhook-id", ""), self.headers.get("webhook-timestamp", "")
        expected = base64.b64encode(hmac.new(key, f"{webhook_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()).decode()
        signatures = [s.split(",", 1)[1] for s in self.headers.get("webhook-signature", "").split() if s.startswith("v1,")]
        with lock:
            if any(hmac.compare_digest(expected, s) for s in signatures):
                received.add(webhook_id)
            else:
                bad.append(webhook_id)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *_):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
threading.Thread(target=server.serve_forever, daemon=True).start()
endpoint = psql(coordinator, f"""INSERT INTO webhook_endpoints (endpoint_id, url, secret)
    VALUES (gen_random_uuid(), 'http://127.0.0.1:{server.server_address[1]}/hook', 'whsec_{base64.b64encode(key).decode()}')
    RETURNING endpoint_id""").splitlines()[0]
psql(coordinator, f"""INSERT INTO deliveries (account_id, endpoint_id, event_sequence, event_id)
    SELECT account_id, '{endpoint}', sequence, event_id FROM events WHERE account_id LIKE 'commits-%'""")
psql(coordinator, f"""INSERT INTO delivery_work (bucket, account_id, due_at)
    SELECT subsync_work_bucket(account_id), account_id, now() FROM deliveries WHERE endpoint_id = '{endpoint}' GROUP BY account_id""")
expected = int(psql(coordinator, f"SELECT count(*) FROM deliveries WHERE endpoint_id = '{endpoint}'"))
if expected == 0:
    sys.exit("deliveries: no event to deliver (drain.py resolves the accounts commits.py synced)")
recover(nodes)
before, planned_before, fanned_before = prepared(nodes), single_shard(nodes), multi_shard(nodes)
serve = subprocess.Popen(command, stdout=open(log, "w"), stderr=subprocess.STDOUT)
PENDING = f"SELECT count(*) FROM deliveries WHERE endpoint_id = '{endpoint}' AND status = 'pending'"


def wait_for_none(total, seconds):
    deadline = time.time() + seconds
    while (left := int(psql(coordinator, PENDING))):
        if serve.poll() is not None:
            sys.exit(f"deliveries: serve exited with {serve.returncode}")
        if time.time() > deadline:
            sys.exit(f"deliveries: {left} of {total} deliveries still pending after {seconds} s")
        time.sleep(0.5)


try:
    wait_for_none(expected, 180)
    deltas = [a - b for a, b in zip(prepared(nodes), before)]
    fanned = [a - b for a, b in zip(multi_shard(nodes), fanned_before)]
    planned = [a - b for a, b in zip(single_shard(nodes), planned_before)]
    left_due = int(psql(coordinator, "SELECT count(*) FROM delivery_work WHERE account_id LIKE 'commits-%'"))
    # Deliveries with no row in delivery_work, as a replay writes them: found by the hold.
    psql(coordinator, """INSERT INTO events (account_id, sequence, event_id, type, occurred_at, payload)
        SELECT account_id, sequence + 1000, gen_random_uuid(), type, occurred_at, payload FROM events
        WHERE account_id LIKE 'commits-%' AND sequence = 1 ORDER BY account_id LIMIT 10""")
    psql(coordinator, f"""INSERT INTO deliveries (account_id, endpoint_id, event_sequence, event_id)
        SELECT account_id, '{endpoint}', sequence, event_id FROM events WHERE account_id LIKE 'commits-%' AND sequence > 1000""")
    wait_for_none(10, 120)
    replayed = subprocess.run([command[0], "replay", "--endpoint", endpoint, "--since", "2000-01-01T00:00:00Z"],
                              capture_output=True, text=True, env={**os.environ, "DATABASE_URL": coordinator})
    if replayed.returncode != 0:
        sys.exit(f"deliveries: subsync replay failed: {replayed.stderr.strip()}")
    total = int(psql(coordinator, f"SELECT count(*) FROM deliveries WHERE endpoint_id = '{endpoint}'"))
    wait_for_none(total - expected - 10, 120)
finally:
    serve.send_signal(signal.SIGTERM)
    serve.wait(timeout=60)
    server.shutdown()
succeeded = int(psql(coordinator, f"SELECT count(*) FROM deliveries WHERE endpoint_id = '{endpoint}' AND status = 'succeeded'"))
psql(coordinator, """INSERT INTO events (account_id, sequence, event_id, type, occurred_at, payload)
    SELECT account_id, sequence + 2000, gen_random_uuid(), type, occurred_at, payload FROM events
    WHERE account_id LIKE 'commits-%' AND sequence = 1 ORDER BY account_id LIMIT 5""")
psql(coordinator, f"""INSERT INTO deliveries (account_id, endpoint_id, event_sequence, event_id)
    SELECT account_id, '{endpoint}', sequence, event_id FROM events WHERE account_id LIKE 'commits-%' AND sequence > 2000""")
distributed = subprocess.run([command[0], "distribute"], capture_output=True, text=True, env={**os.environ, "DATABASE_URL": coordinator})
noted = int(psql(coordinator, """SELECT count(*) FROM delivery_work w WHERE w.account_id IN (
    SELECT account_id FROM events WHERE account_id LIKE 'commits-%' AND sequence > 2000)"""))
psql(coordinator, f"UPDATE webhook_endpoints SET enabled = false WHERE endpoint_id = '{endpoint}'")
first, expected = expected, expected + 10
print(f"deliveries: {succeeded} succeeded, {len(received)} received with a valid signature, {len(bad)} without; "
      f"of {total} with the replay; first {first}: two-phase commits {deltas}, single-shard statements planned {planned}, on several shards {fanned} "
      f"by node (coordinator first); accounts still noted due after {left_due}")
# A replayed event is sent again with its id: the receiver counts ids, so each once.
if succeeded < total or len(received) < expected:
    sys.exit("deliveries: a delivery did not reach the receiver")
if bad:
    sys.exit("deliveries: a delivery's signature did not verify")
if any(deltas):
    sys.exit("deliveries: a claim or a record committed in two phases (docs/CITUS.md, \"How the pipeline runs on Citus\")")
if any(fanned[1:]):
    sys.exit("deliveries: a claim or a record ran a statement on several shards on a worker node")
if planned[0] >= first // 4:
    sys.exit("deliveries: the claims' and records' statements went through the coordinator, not to the worker nodes")
if left_due:
    sys.exit("deliveries: an account whose deliveries are done is still noted due")
if distributed.returncode != 0 or noted != 5:
    sys.exit(f"deliveries: subsync distribute noted {noted} of 5 accounts with pending deliveries and no row "
             f"(exit {distributed.returncode}: {distributed.stderr.strip()[-300:]})")
print("deliveries: subsync distribute noted the 5 accounts with pending deliveries and no row")
