#!/usr/bin/env python3
"""The delivery claims on their nodes (issue #62), run by scripts/citus after drain.py: an
endpoint on a receiver of this script's own is given a delivery of every event the drain wrote,
and a `serve` with delivery loops only (started here, from the command after `--`) sends them.
With the accounts' nodes known, a claim reads the due deliveries' accounts once on the
coordinator, then claims each shard's share on its node, and each shard's attempts are recorded
there (docs/CITUS.md, "How the pipeline runs on Citus"), so that:

- every delivery succeeds, each reaching the receiver with a signature that verifies;
- no worker node records a prepared transaction or runs a statement on several shards, and the
  coordinator records none: a claim and a record commit on one node each;
- the claims' and records' statements are planned on the worker nodes: the coordinator plans
  fewer single-shard statements than there are deliveries.

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
expected = int(psql(coordinator, f"SELECT count(*) FROM deliveries WHERE endpoint_id = '{endpoint}'"))
if expected == 0:
    sys.exit("deliveries: no event to deliver (drain.py resolves the accounts commits.py synced)")
recover(nodes)
before, planned_before, fanned_before = prepared(nodes), single_shard(nodes), multi_shard(nodes)
serve = subprocess.Popen(command, stdout=open(log, "w"), stderr=subprocess.STDOUT)
PENDING = f"SELECT count(*) FROM deliveries WHERE endpoint_id = '{endpoint}' AND status = 'pending'"
try:
    deadline = time.time() + 180
    while (left := int(psql(coordinator, PENDING))):
        if serve.poll() is not None:
            sys.exit(f"deliveries: serve exited with {serve.returncode}")
        if time.time() > deadline:
            sys.exit(f"deliveries: {left} of {expected} deliveries still pending after 180 s")
        time.sleep(0.5)
finally:
    serve.send_signal(signal.SIGTERM)
    serve.wait(timeout=60)
    server.shutdown()
deltas = [a - b for a, b in zip(prepared(nodes), before)]
fanned = [a - b for a, b in zip(multi_shard(nodes), fanned_before)]
planned = [a - b for a, b in zip(single_shard(nodes), planned_before)]
succeeded = int(psql(coordinator, f"SELECT count(*) FROM deliveries WHERE endpoint_id = '{endpoint}' AND status = 'succeeded'"))
psql(coordinator, f"UPDATE webhook_endpoints SET enabled = false WHERE endpoint_id = '{endpoint}'")
print(f"deliveries: {succeeded} of {expected} succeeded, {len(received)} received with a valid signature, {len(bad)} without; "
      f"two-phase commits {deltas}, single-shard statements planned {planned}, on several shards {fanned} by node "
      "(coordinator first)")
if succeeded < expected or len(received) < expected:
    sys.exit("deliveries: a delivery did not reach the receiver")
if bad:
    sys.exit("deliveries: a delivery's signature did not verify")
if any(deltas):
    sys.exit("deliveries: a claim or a record committed in two phases (docs/CITUS.md, \"How the pipeline runs on Citus\")")
if any(fanned[1:]):
    sys.exit("deliveries: a claim or a record ran a statement on several shards on a worker node")
if planned[0] >= expected:
    sys.exit("deliveries: the claims' and records' statements went through the coordinator, not to the worker nodes")
