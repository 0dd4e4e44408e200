"""Hostile requests: malformed and malicious requests sent throughout, each expecting a 4xx with
the JSON error body."""
import json
import random
import threading
import time
import urllib.parse
from collections import Counter, defaultdict

from common import ADMIN_KEY, CLIENT_TIMEOUT
from http_requests import is_error_body, mint, raw_request
from load import iso


def hostile_cases():
    """(name, builder(port) -> raw bytes, may_accept). Expected: a 4xx with the JSON error body."""
    acct = "hostile-acct"
    good_device = {"id": "hostile-dev", "platform": "ios", "app_version": "1"}

    def report(**changes):
        r = {"report_id": f"h-{time.time_ns()}-{random.randrange(10**9)}", "observed_at": iso(time.time()),
             "product_id": "voip.basic.monthly", "original_transaction_id": "h-tx", "transaction_id": "h-tx",
             "purchased_at": iso(time.time() - 86400), "expires_at": iso(time.time() + 86400 * 20)}
        r.update(changes)
        return r

    def request(method, path, body=b"", auth=f"Bearer {ADMIN_KEY}", content_type="application/json", extra=""):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        if auth is not None:
            head += f"Authorization: {auth}\r\n"
        if content_type:
            head += f"Content-Type: {content_type}\r\n"
        head += extra
        if "Transfer-Encoding" not in extra and "Content-Length" not in extra:
            head += f"Content-Length: {len(body)}\r\n"
        return head.encode() + b"\r\n" + body

    sync = f"/v1/accounts/{acct}/sync"

    def sync_body(**changes):
        return {"device": good_device, "reports": [report(**changes)]}

    nested = b"[" * 100_000 + b"]" * 100_000
    nested_objects = b'{"a":' * 20_000 + b"1" + b"}" * 20_000
    huge = json.dumps({"device": good_device, "reports": [report(product_id="x" * (2 << 20))]}).encode()
    chunk = b"x" * 65536
    chunked_huge = b"".join(b"%x\r\n" % len(chunk) + chunk + b"\r\n" for _ in range(40)) + b"0\r\n\r\n"
    cases = [
        # wrong types
        ("reports not an array", lambda: request("POST", sync, {"device": good_device, "reports": "x"})),
        ("report_id a number", lambda: request("POST", sync, {"device": good_device, "reports": [report(report_id=5)]})),
        ("device an array", lambda: request("POST", sync, {"device": [], "reports": []})),
        ("observed_at a number", lambda: request("POST", sync, sync_body(observed_at=123))),
        ("expires_at a boolean", lambda: request("POST", sync, sync_body(expires_at=True))),
        ("reports of numbers", lambda: request("POST", sync, {"device": good_device, "reports": [1, 2]})),
        ("body null", lambda: request("POST", sync, b"null")),
        ("body an array", lambda: request("POST", sync, b"[]")),
        ("empty body", lambda: request("POST", sync, b"")),
        ("truncated JSON", lambda: request("POST", sync, b'{"device": {"id": "x"}, "reports": [')),
        ("number too large", lambda: request("POST", sync, b'{"device": {"id": "x"}, "reports": [{"report_id": 1e400}]}')),
        ("wait_ms negative", lambda: request("POST", sync + "?wait_ms=-1", sync_body())),
        ("wait_ms not a number", lambda: request("POST", sync + "?wait_ms=abc", sync_body())),
        ("too many reports", lambda: request("POST", sync, {"device": good_device, "reports": [report() for _ in range(101)]})),
        ("date out of range", lambda: request("POST", sync, sync_body(purchased_at="1999-01-01T00:00:00Z"))),
        ("expiry before purchase", lambda: request("POST", sync, sync_body(expires_at="2001-01-01T00:00:00Z"))),
        ("not a date", lambda: request("POST", sync, sync_body(observed_at="yesterday"))),
        # huge bodies
        ("2 MiB body", lambda: request("POST", sync, huge)),
        ("chunked 2.5 MiB body", lambda: request("POST", sync, chunked_huge, extra="Transfer-Encoding: chunked\r\n")),
        ("content-length 50 MiB, short body", lambda: request("POST", sync, b"{}", extra="Content-Length: 52428800\r\n")[:-2]),
        # bad credentials
        ("no credentials", lambda: request("POST", sync, sync_body(), auth=None)),
        ("garbage token", lambda: request("POST", sync, sync_body(), auth="Bearer not-a-token")),
        ("basic auth", lambda: request("POST", sync, sync_body(), auth="Basic YWRtaW46YWRtaW4=")),
        ("forged token", lambda: request("POST", sync, sync_body(), auth=f"Bearer {mint(acct, secret='x' * 40)}")),
        ("expired token", lambda: request("POST", sync, sync_body(), auth=f"Bearer {mint(acct, ttl=-600)}")),
        ("alg none token", lambda: request("POST", sync, sync_body(), auth=f"Bearer {mint(acct, alg='none')}")),
        ("another account's token", lambda: request("POST", sync, sync_body(), auth=f"Bearer {mint('someone-else')}")),
        ("admin key with a suffix", lambda: request("GET", f"/v1/accounts/{acct}", auth=f"Bearer {ADMIN_KEY}x")),
        ("webhook endpoints with a device token", lambda: request("GET", "/v1/webhook-endpoints", auth=f"Bearer {mint(acct)}")),
        # SQL-looking strings
        ("SQL in the account id", lambda: request("POST", "/v1/accounts/" + urllib.parse.quote("x' OR '1'='1") + "/sync", sync_body())),
        ("SQL in the account id (read)", lambda: request("GET", "/v1/accounts/" + urllib.parse.quote("1; DROP TABLE reports; --"))),
        ("SQL in the report id", lambda: request("POST", sync, sync_body(report_id="1'; DROP TABLE reports; --"))),
        ("SQL in the product id", lambda: request("POST", sync, sync_body(product_id="voip'; DELETE FROM account_states; --")), True),
        ("SQL in the platform", lambda: request("POST", sync, {"device": dict(good_device, platform="'); DROP TABLE devices; --"), "reports": [report()]}), True),
        ("SQL in the feature", lambda: request("GET", f"/v1/accounts/{acct}/features/" + urllib.parse.quote("x' UNION SELECT secret FROM webhook_endpoints --"))),
        ("SQL in the endpoint id", lambda: request("GET", "/v1/webhook-endpoints/" + urllib.parse.quote("1' OR '1'='1"))),
        # invalid UTF-8 and odd encodings
        ("invalid UTF-8 in a string", lambda: request("POST", sync, b'{"device": {"id": "d\xff\xfe"}, "reports": []}')),
        ("invalid UTF-8 in the account id", lambda: request("POST", "/v1/accounts/a%ff%fe/sync", sync_body())),
        ("lone surrogate escape", lambda: request("POST", sync, b'{"device": {"id": "\\ud800"}, "reports": []}')),
        ("NUL in the account id", lambda: request("GET", "/v1/accounts/a%00b")),
        # JSON in UTF-16 with a byte order mark: Foundation's decoder reads it; accepting is fine.
        ("UTF-16 body", lambda: request("POST", sync, json.dumps(sync_body()).encode("utf-16")), True),
        ("blocked account id", lambda: request("POST", "/v1/accounts/undefined/sync", sync_body())),
        ("account id too long", lambda: request("GET", "/v1/accounts/" + "a" * 129)),
        # deeply nested JSON
        ("100k nested arrays", lambda: request("POST", sync, nested)),
        ("20k nested objects", lambda: request("POST", sync, nested_objects)),
        ("nested arrays inside reports", lambda: request("POST", sync, b'{"device": {"id": "x"}, "reports": ' + b"[" * 50_000 + b"]" * 50_000 + b"}")),
        # protocol odds and ends
        ("unknown route", lambda: request("GET", "/v1/nothing-here")),
        ("wrong method", lambda: request("DELETE", sync)),
        ("endpoint with a bad URL", lambda: request("POST", "/v1/webhook-endpoints", {"url": "file:///etc/passwd"})),
        ("endpoint with a bad event type", lambda: request("POST", "/v1/webhook-endpoints", {"url": "http://127.0.0.1:1/x", "event_types": ["x' OR 1=1"]})),
        ("endpoint id not a uuid", lambda: request("DELETE", "/v1/webhook-endpoints/not-a-uuid")),
    ]
    return [(c[0], c[1], c[2] if len(c) > 2 else False) for c in cases]


class Hostile:
    def __init__(self, serves, record, pause):
        self.serves, self.record, self.pause = serves, record, pause
        self.cases = hostile_cases()
        self.stop = threading.Event()
        self.sent = 0
        self.accepted = 0      # reports the may-accept cases stored (their 202 said so)
        self.by_case = defaultdict(Counter)

    def run(self):
        rng = random.Random(17)
        index = 0
        while not self.stop.is_set():
            name, build, may_accept = self.cases[index % len(self.cases)]
            index += 1
            live = [s for s in self.serves if s.up]
            if not live:
                time.sleep(0.1)
                continue
            serve = rng.choice(live)
            incarnation = serve.process
            status, headers, data = raw_request(serve.port, build())
            # A serve SIGKILLed during the request (and perhaps already restarted) may cut its
            # answer off; that is the fault's doing, not an answer to judge.
            interrupted = serve.process is not incarnation or not serve.up
            self.sent += 1
            self.by_case[name][status] += 1
            self.record.count("hostile", status)
            if status is None:
                if not interrupted:
                    with self.record.lock:
                        self.record.hostile_bad.append(f"hostile '{name}' to {serve.name}: connection closed without an answer")
            elif status == "timeout":
                self.record.unexpected_answer(f"hostile '{name}' to {serve.name}: no answer in {CLIENT_TIMEOUT:.0f} s")
            elif status == 503 and headers.get("retry-after") and self.record.db_fault_active():
                with self.record.lock:
                    self.record.tolerated_503["hostile"] += 1
            elif status >= 500:
                self.record.unexpected_answer(f"hostile '{name}' to {serve.name}: {status} {data[:200]!r}")
            elif 200 <= status < 300 and may_accept:
                try:
                    self.accepted += json.loads(data)["accepted"]
                except (ValueError, KeyError, TypeError):
                    self.record.hostile_bad.append(f"hostile '{name}': 2xx without a sync answer: {data[:200]!r}")
            elif not (400 <= status < 500) or not is_error_body(data):
                with self.record.lock:
                    self.record.hostile_bad.append(f"hostile '{name}' to {serve.name}: {status} {data[:200]!r}")
            self.stop.wait(self.pause)
