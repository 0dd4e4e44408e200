#!/usr/bin/env python3
"""How the cost of a usage request grows with an account's ledger (issue #50, scripts/bench/usage).

For each size (entries already in the account's ledger), one account is given that history
through the API (POST /usage, 500 entries a request, dated over the last 85 days from a device
the service has known for 88 days: its first contact is set with SQL, since usage cannot be dated
before a device's first contact), then the script times, one request at a time on a kept-alive
connection: POST /usage of one entry, a hold (reserve) and its settle, and GET /usage (the current
period, first page). It prints the median (p50) and p90 of each at each size and the ratio of the
largest size's p50 to the smallest's.

Every account is given a billion minutes of credit first (`subsync credits adjust`), so no hold
is refused whatever the history used.

Usage: usage_cost.py URL ADMIN_KEY DATABASE_URL SUBSYNC_BINARY [SIZES...]   (default sizes 100 10000 100000)
"""
import http.client
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from urllib.parse import urlparse

url, admin_key, database_url, binary = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
sizes = [int(s) for s in sys.argv[5:]] or [100, 10_000, 100_000]
REQUESTS = 60
parsed = urlparse(url)
connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=120)
headers = {"Authorization": f"Bearer {admin_key}", "Content-Type": "application/json"}


def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    started = time.perf_counter()
    connection.request(method, path, body=data, headers=headers)
    response = connection.getresponse()
    payload = response.read()
    elapsed = (time.perf_counter() - started) * 1000
    if response.status >= 300:
        raise SystemExit(f"{method} {path}: {response.status} {payload[:300]!r}")
    return elapsed, json.loads(payload) if payload else None


def stamp(moment):
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def psql(sql):
    subprocess.run(["psql", database_url, "-qtAX", "-c", sql], check=True, stdout=subprocess.DEVNULL)


results = {}
for size in sizes:
    account = f"cost-{size}-{uuid.uuid4().hex[:8]}"
    now = datetime.now(timezone.utc)
    psql(f"INSERT INTO devices (account_id, device_id, first_seen_at, last_seen_at) "
         f"VALUES ('{account}', 'phone', now() - interval '88 days', now() - interval '88 days')")
    subprocess.run([binary, "credits", "adjust", "--account", account, "--units", "1000000000", "--reason", "bench"],
                   check=True, stdout=subprocess.DEVNULL, env={**os.environ, "DATABASE_URL": database_url})
    written = 0
    started = time.perf_counter()
    while written < size:
        batch = min(500, size - written)
        entries = []
        for index in range(written, written + batch):
            # Spread over the last 85 days, oldest first; 1 minute each.
            at = now - timedelta(days=85) + timedelta(seconds=(85 * 86_400 - 3_600) * index / max(1, size))
            entries.append({"id": f"h{index}", "meter": "minutes", "units": 1, "at": stamp(at)})
        call("POST", f"/v1/accounts/{account}/usage", {"device": {"id": "phone"}, "usage": entries})
        written += batch
    history_seconds = time.perf_counter() - started

    timings = {"POST /usage (1 entry)": [], "hold": [], "settle": [], "GET /usage": []}
    for index in range(REQUESTS):
        moment = stamp(datetime.now(timezone.utc) - timedelta(seconds=30))
        elapsed, _ = call("POST", f"/v1/accounts/{account}/usage",
                          {"device": {"id": "phone"}, "usage": [{"id": f"n{index}", "meter": "minutes", "units": 1, "at": moment}]})
        timings["POST /usage (1 entry)"].append(elapsed)
        elapsed, hold = call("POST", f"/v1/accounts/{account}/usage/holds",
                             {"device": {"id": "phone"}, "meter": "minutes", "units": 1, "ttl_seconds": 60})
        timings["hold"].append(elapsed)
        if hold and hold.get("hold"):
            elapsed, _ = call("POST", f"/v1/accounts/{account}/usage/holds/{hold['hold']['id']}/settle", {"units": 1})
            timings["settle"].append(elapsed)
        elapsed, _ = call("GET", f"/v1/accounts/{account}/usage?meter=minutes")
        timings["GET /usage"].append(elapsed)
    results[size] = timings
    print(f"history of {size:,} entries written through the API in {history_seconds:.1f} s", flush=True)

print()
print(f"{'request':<24}" + "".join(f"{f'{size:,} entries':>22}" for size in sizes) + f"{'p50 ratio':>12}")
for name in results[sizes[0]]:
    cells = []
    for size in sizes:
        values = results[size][name]
        if not values:
            cells.append(f"{'-':>22}")
            continue
        p50 = statistics.median(values)
        p90 = statistics.quantiles(values, n=10)[-1] if len(values) >= 10 else max(values)
        cells.append(f"{f'p50 {p50:.2f} p90 {p90:.2f} ms':>22}")
    first, last = results[sizes[0]][name], results[sizes[-1]][name]
    ratio = statistics.median(last) / statistics.median(first) if first and last else float("nan")
    print(f"{name:<24}" + "".join(cells) + f"{ratio:>11.2f}x")
