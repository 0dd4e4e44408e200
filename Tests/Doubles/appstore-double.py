#!/usr/bin/env python3
"""A real App Store Server API double for subsync's tests (issue #51, docs/STORE.md).

Every request to /inApps/... must carry a bearer JWT that PyJWT (an implementation independent
of ours) verifies against the public half of the key given with --key-file: ES256, header `kid`
(--key-id) and `typ` JWT, claims `iss` (--issuer), `aud` appstoreconnect-v1, `bid` (--bundle),
`iat` not in the future (60 s of skew), `exp` in the future and at most 60 minutes after `iat`.
A request that fails gets 401 with an empty body, as Apple answers, and is recorded with why.

What each route answers is scripted by the test (signed payloads are signed by the tests' own
certificate authority, so the double holds no signing key):

  POST /__double/script  {"method": "GET", "path": "/inApps/v1/subscriptions/t1",
                          "query": {"revision": "r1"},          (optional: any query when left out)
                          "answers": [{"status": 200, "json": {...}, "headers": {"Retry-After": "..."},
                                       "retry_after_in": 3, "delay": 0.5, "raw": "text"}, ...]}
      answers are given in order; the last one repeats. A script for a method, path and query
      already scripted replaces that one (its answers start again). `retry_after_in` sends
      Retry-After as Apple does, a UNIX time in milliseconds: that many seconds after the answer.
      Unscripted /inApps routes answer 404 {"errorCode": 4040010} (transaction id not found).
  GET  /__double/requests  every /inApps request: method, path, query, body, time (UNIX s),
                           jwt {"valid", "error", "header", "claims"}, status (what it answered)
  POST /__double/reset     forgets scripts and requests

Usage: appstore-double.py --key-file F --key-id K --issuer I --bundle B [--port N]
prints "PORT <n>" when listening.
"""
import argparse
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import jwt
from cryptography.hazmat.primitives import serialization

lock = threading.Lock()
scripts = {}  # (method, path) -> list of {"query": dict|None, "answers": [...], "served": int}
requests = []
options = None
public_key = None

NOT_FOUND = {"errorCode": 4040010, "errorMessage": "Transaction id not found."}


def check_jwt(authorization):
    """Verifies the bearer token; returns the record's jwt part."""
    record = {"valid": False, "error": None, "header": None, "claims": None}
    if not authorization or not authorization.startswith("Bearer "):
        record["error"] = "no bearer token"
        return record
    token = authorization[len("Bearer "):]
    try:
        record["header"] = jwt.get_unverified_header(token)
        claims = jwt.decode(
            token, public_key, algorithms=["ES256"], audience="appstoreconnect-v1", issuer=options.issuer,
            options={"require": ["iss", "iat", "exp", "aud", "bid"]}, leeway=0)
        record["claims"] = claims
        header = record["header"]
        now = time.time()
        if header.get("kid") != options.key_id:
            record["error"] = "kid %r is not %r" % (header.get("kid"), options.key_id)
        elif header.get("typ") != "JWT":
            record["error"] = "typ %r is not JWT" % header.get("typ")
        elif claims.get("bid") != options.bundle:
            record["error"] = "bid %r is not %r" % (claims.get("bid"), options.bundle)
        elif claims["iat"] > now + 60:
            record["error"] = "iat in the future"
        elif claims["exp"] - claims["iat"] > 3600:
            record["error"] = "exp more than 60 minutes after iat"
        else:
            record["valid"] = True
    except Exception as error:  # PyJWT's errors: signature, expiry, audience, issuer, shape
        record["error"] = "%s: %s" % (type(error).__name__, error)
    return record


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def send(self, status, payload=None, headers=None, raw=None):
        data = raw.encode() if raw is not None else (json.dumps(payload).encode() if payload is not None else b"")
        self.send_response(status)
        if data:
            self.send_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            self.send_header(name, str(value))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.handle_any("GET")

    def do_POST(self):
        self.handle_any("POST")

    def handle_any(self, method):
        parts = urlsplit(self.path)
        body = self.body()
        if parts.path == "/__double/requests" and method == "GET":
            with lock:
                return self.send(200, requests)
        if parts.path == "/__double/reset" and method == "POST":
            with lock:
                scripts.clear()
                requests.clear()
            return self.send(200, {})
        if parts.path == "/__double/script" and method == "POST":
            script = json.loads(body)
            with lock:
                entries = scripts.setdefault((script["method"], script["path"]), [])
                entries[:] = [entry for entry in entries if entry["query"] != script.get("query")]
                entries.append({"query": script.get("query"), "answers": script["answers"], "served": 0})
            return self.send(200, {})
        if not parts.path.startswith("/inApps/"):
            return self.send(404, {"error": "not an App Store Server API path"})
        query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
        record = {
            "method": method, "path": parts.path, "query": query, "body": body.decode(errors="replace"),
            "time": time.time(), "jwt": check_jwt(self.headers.get("Authorization")),
        }
        with lock:
            requests.append(record)
            answer = None
            if record["jwt"]["valid"]:
                for script in scripts.get((method, parts.path), []):
                    if script["query"] is None or script["query"] == query:
                        answer = script["answers"][min(script["served"], len(script["answers"]) - 1)]
                        script["served"] += 1
                        break
        if not record["jwt"]["valid"]:
            record["status"] = 401
            return self.send(401)
        if answer is None:
            record["status"] = 404
            return self.send(404, NOT_FOUND)
        if answer.get("delay"):
            time.sleep(answer["delay"])
        headers = dict(answer.get("headers") or {})
        if answer.get("retry_after_in") is not None:
            headers["Retry-After"] = str(int((time.time() + answer["retry_after_in"]) * 1000))
        record["status"] = answer.get("status", 200)
        self.send(record["status"], answer.get("json"), headers, answer.get("raw"))


def main():
    global options, public_key
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--key-file", required=True)
    parser.add_argument("--key-id", required=True)
    parser.add_argument("--issuer", required=True)
    parser.add_argument("--bundle", required=True)
    options = parser.parse_args()
    with open(options.key_file, "rb") as handle:
        public_key = serialization.load_pem_private_key(handle.read(), password=None).public_key()
    # SIGTERM ends the double even when the launching process ignores it (the ignore would be
    # inherited).
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    server = ThreadingHTTPServer(("127.0.0.1", options.port), Handler)
    server.daemon_threads = True
    print("PORT %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
