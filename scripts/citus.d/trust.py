#!/usr/bin/env python3
"""The trust path on a Citus cluster (issue #18), run by scripts/citus against a `serve` that
requires signatures: StoreKit 2 JWS from a test chain (scripts/bench/lib/signed_material.py) synced
for every account at once, each verified and bound to its account in one distributed transaction
(the purchase's transaction_owners row on its shard, the account's rows on theirs); then one
account's purchase sent to another account, which must be refused with 409 and leave the owner
as it was.

usage: trust.py PORT SIGNED_TSV DATABASE_URL ADMIN_KEY
"""
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

port, material, url, key = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}


def call(method, path, body=None):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, headers=headers,
                                     data=json.dumps(body).encode() if body is not None else None)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def psql(sql):
    return subprocess.run(["psql", url, "-qtAX", "-c", sql], capture_output=True, text=True, check=True).stdout.split()


def sync(account, jws, device="citus-device"):
    reports = [{"report_id": f"{account}-{device}-{i}", "observed_at": "2026-11-20T10:00:00Z", "signed_transaction": token}
               for i, token in enumerate(jws.split())]
    return call("POST", f"/v1/accounts/{account}/sync?wait_ms=10000",
                {"device": {"id": device, "platform": "ios", "app_version": "1.0"}, "reports": reports})


deadline = time.time() + 60
while True:
    try:
        if call("GET", "/readyz")[0] == 200:
            break
    except OSError:
        pass
    if time.time() > deadline:
        sys.exit("trust: serve did not become ready in 60 s")
    time.sleep(0.2)

accounts = [line.rstrip("\n").split("\t") for line in open(material)]
answers = {}
threads = [threading.Thread(target=lambda a=a, j=j: answers.__setitem__(a, sync(a, j))) for a, j in accounts]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
refused = {account: status for account, (status, _) in answers.items() if status != 202}
if refused:
    sys.exit(f"trust: signed syncs not accepted: {refused}")
inactive = [account for account, (_, body) in answers.items()
            if not any(e["is_active"] for e in body["account"]["entitlements"])]
if inactive:
    sys.exit(f"trust: accounts without an active entitlement after their signed purchase: {inactive}")
owners = psql("SELECT account_id || '=' || count(*) FROM transaction_owners GROUP BY account_id")
if sorted(owners) != sorted(f"{account}=1" for account, _ in accounts):
    sys.exit(f"trust: each account should own its one purchase; transaction_owners says {owners}")

victim, jws = accounts[0]
status, body = sync("citus-thief", jws, device="thief-device")
if status != 409 or body.get("error", {}).get("code") != "purchase_bound_to_another_account":
    sys.exit(f"trust: another account's purchase: expected 409 purchase_bound_to_another_account, got {status} {body}")
# Two lookups: the tables are distributed by different keys, so Citus does not join them.
purchases = psql(f"SELECT DISTINCT original_transaction_id FROM reports WHERE account_id = '{victim}'")
owner = psql("SELECT DISTINCT account_id FROM transaction_owners WHERE original_transaction_id IN ("
             + ", ".join(f"'{purchase}'" for purchase in purchases) + ")")
if owner != [victim]:
    sys.exit(f"trust: the purchase's owner changed: {owner}")
# Support's search (the console's, GET /v1/admin/accounts?q=) on the cluster: by account id, by
# the purchase's original transaction id (transactions and transaction_owners, distributed by
# different keys) and by something nobody has.
for query, matched_by in [(victim, "account_id"), (purchases[0], "original_transaction_id"), ("citus-nobody", None)]:
    status, body = call("GET", f"/v1/admin/accounts?q={urllib.parse.quote(query)}")
    found = [(m["account_id"], m["matched_by"]) for m in body.get("matches", [])] if status == 200 else None
    expected = [(victim, [matched_by])] if matched_by else []
    if matched_by == "original_transaction_id":
        found = [(account, [by for by in bys if by == matched_by]) for account, bys in (found or [])]
    if found != expected:
        sys.exit(f"trust: account search for {query!r}: expected {expected}, got {status} {body}")
print(f"trust path: {len(accounts)} signed purchases verified and bound at once (a distributed transaction each); "
      "another account's purchase refused with 409, its owner unchanged; the account found by search")
