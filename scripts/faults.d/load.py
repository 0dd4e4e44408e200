"""The load: devices sending paced sync and read requests at both serve processes."""
import http.client
import json
import queue
import random
import threading
import time

from common import ADMIN_KEY, CLIENT_TIMEOUT
from http_requests import http_request, mint


AUTO = ["voip.basic.monthly", "voip.premium.monthly", "voip.business.monthly", "voip.basic.yearly", "voip.premium.yearly"]
PASSES = ["voip.basic.pass.3m", "voip.premium.pass.6m"]
LIFETIME = ["voip.premium.lifetime"]


def iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class Device:
    def __init__(self, account, index, rng, run_tag):
        self.account = account
        self.id = f"dev-{index}"
        self.platform = rng.choice(["ios", "ipados", "macos"])
        self.rng = rng
        self.run_tag = run_tag
        self.counter = 0
        self.sent = []

    def next_reports(self, account_plan):
        rng = self.rng
        reports = []
        earlier = len(self.sent)
        for _ in range(rng.choice([1, 1, 2, 3, 5])):
            if earlier and rng.random() < 0.07:
                resend = self.sent[rng.randrange(earlier)]   # a report of an earlier request: a duplicate
                if resend not in reports:
                    reports.append(resend)
                continue
            self.counter += 1
            transaction = rng.choice(account_plan)
            now = time.time()
            renewal = rng.randint(0, 4)
            purchased = transaction["start"] + renewal * 30 * 86400
            report = {
                "report_id": f"{self.run_tag}-{self.account}-{self.id}-{self.counter}",
                "observed_at": iso(now - rng.randint(0, 3600)),
                "product_id": transaction["product"],
                "original_transaction_id": transaction["otx"],
                "transaction_id": f"{transaction['otx']}-{renewal}" if transaction["kind"] == "auto" else transaction["otx"],
                "purchased_at": iso(purchased),
            }
            if transaction["kind"] == "auto":
                report["expires_at"] = iso(purchased + 30 * 86400)
                report["will_auto_renew"] = rng.random() < 0.8
                if rng.random() < 0.05:
                    report["grace_period_expires_at"] = iso(purchased + 36 * 86400)
                if rng.random() < 0.04:
                    report["in_billing_retry"] = True
            if rng.random() < 0.03:
                report["revoked_at"] = iso(purchased + 86400)
                report["revocation_reason"] = rng.choice(["developer_issue", "other"])
            if rng.random() < 0.03:
                report["is_upgraded"] = True
            report["environment"] = "production"
            reports.append(report)
            self.sent.append(report)
        return reports


def make_plan(rng, accounts):
    plan = {}
    now = time.time()
    for account in accounts:
        transactions = []
        for k in range(rng.choice([1, 1, 2, 3])):
            kind = rng.choices(["auto", "pass", "life"], weights=[8, 2, 1])[0]
            product = rng.choice(AUTO if kind == "auto" else PASSES if kind == "pass" else LIFETIME)
            # Whole days plus half a day back: no expiry (30 days, calendar months) falls within
            # hours of the run, so the sweeper writes no events while the checks read.
            start = now - rng.randint(10, 200) * 86400 - 43200
            transactions.append({"otx": f"{account}-t{k}", "product": product, "kind": kind, "start": start})
        plan[account] = transactions
    return plan


class Load:
    """Paced sync/read requests from many devices at both serve processes."""

    def __init__(self, serves, record, devices, rate, threads, seed):
        self.serves, self.record, self.rate, self.threads = serves, record, rate, threads
        rng = random.Random(seed)
        run_tag = f"r{seed}"
        accounts = [f"acct-{i}" for i in range((devices + 1) // 2)]
        self.plan = make_plan(rng, accounts)
        self.devices = [Device(accounts[i // 2], i, random.Random(seed * 7919 + i), run_tag) for i in range(devices)]
        self.tokens = {account: mint(account, ttl=6 * 3600) for account in accounts}
        self.jobs = queue.Queue(maxsize=threads * 4)
        self.stop = threading.Event()
        self.rng = rng

    def producer(self, seconds):
        deadline = time.time() + seconds
        interval = 1.0 / self.rate
        next_at = time.time()
        index = 0
        while time.time() < deadline and not self.stop.is_set():
            device = self.devices[index % len(self.devices)]
            index += 1
            roll = self.rng.random()
            if roll < 0.85:
                reports = device.next_reports(self.plan[device.account])
                body = {"device": {"id": device.id, "platform": device.platform, "app_version": "3.1"}, "reports": reports}
                path = f"/v1/accounts/{device.account}/sync"
                if self.rng.random() < 0.05:
                    path += "?wait_ms=1000"
                job = ("sync", "POST", path, json.dumps(body).encode(), device.account, [r["report_id"] for r in reports])
            elif roll < 0.95:
                job = ("read", "GET", f"/v1/accounts/{device.account}", None, device.account, [])
            else:
                feature = self.rng.choice(["call_recording", "video_calls", "international_calls", "no_such_feature"])
                job = ("feature", "GET", f"/v1/accounts/{device.account}/features/{feature}", None, device.account, [])
            self.jobs.put(job)
            next_at += interval
            pause = next_at - time.time()
            if pause > 0:
                time.sleep(pause)
        for _ in range(self.threads):
            self.jobs.put(None)

    def worker(self, number):
        rng = random.Random(number)
        connections = {}
        while True:
            job = self.jobs.get()
            if job is None:
                break
            self.send(job, rng, connections)
        for connection in connections.values():
            connection.close()

    def send(self, job, rng, connections):
        kind, method, path, body, account, report_ids = job
        headers = {"Content-Type": "application/json"}
        if rng.random() < 0.3:
            headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        else:
            headers["Authorization"] = f"Bearer {self.tokens[account]}"
        first = time.time()
        attempt = 0
        target = rng.randrange(len(self.serves))
        while True:
            attempt += 1
            serve = self.serves[(target + attempt) % len(self.serves)]
            connection = connections.get(serve.name)
            if connection is None:
                connection = connections[serve.name] = http.client.HTTPConnection("127.0.0.1", serve.port, timeout=CLIENT_TIMEOUT)
            was_up = serve.up
            sent_at = time.time()
            status, response_headers, data = http_request(serve.port, method, path, body, headers, connection=connection)
            self.record.count(kind, status)
            if status is None:
                # Refused or reset: the process was killed on purpose (expected), or a kept-alive
                # connection was closed; either way the device tries again at the other process.
                connections.pop(serve.name, None)
                with self.record.lock:
                    self.record.connection_errors[f"{serve.name} {'down' if not (was_up and serve.up) else 'up'}"] += 1
            elif status == "timeout":
                connections.pop(serve.name, None)
                self.record.unexpected_answer(f"{kind} {method} {path} to {serve.name}: no answer in {CLIENT_TIMEOUT:.0f} s")
            elif status == 503 and response_headers.get("retry-after"):
                with self.record.lock:
                    self.record.tolerated_503[kind] += 1
                time.sleep(min(float(response_headers["retry-after"]), 2.0) * rng.uniform(0.5, 1.0))
            elif status >= 500:
                self.record.unexpected_answer(f"{kind} {method} {path} to {serve.name}: {status} {data[:200]!r}")
            else:
                with self.record.lock:
                    self.record.requests += 1
                    self.record.latencies.append(time.time() - sent_at)
                if kind == "sync":
                    if status == 202:
                        document = json.loads(data)
                        if document["accepted"] + document["duplicates"] != len(report_ids):
                            self.record.unexpected_answer(f"sync {path}: accepted+duplicates != {len(report_ids)}: {document}")
                        with self.record.lock:
                            self.record.accepted.update((account, r) for r in report_ids)
                            if self.record.fault_windows and self.record.fault_windows[-1][1] and self.record.first_ok_after_pg is None:
                                self.record.first_ok_after_pg = time.time() - self.record.fault_windows[-1][1]
                    else:
                        self.record.hostile_bad.append(f"load sync {path}: {status} {data[:300]!r}")
                elif kind == "read" and status != 200:
                    self.record.hostile_bad.append(f"load read {path}: {status} {data[:300]!r}")
                elif kind == "feature" and status not in (200, 404):
                    self.record.hostile_bad.append(f"load feature {path}: {status} {data[:300]!r}")
                return
            if time.time() - first > 90:
                with self.record.lock:
                    self.record.gave_up += 1
                self.record.unexpected_answer(f"{kind} {path}: no success in 90 s of retries (last {status})")
                return
            if status is None or status == "timeout":
                time.sleep(0.05 * min(attempt, 20))
