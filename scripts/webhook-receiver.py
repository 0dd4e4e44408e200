#!/usr/bin/env python3
"""A real webhook receiver for subsync's tests and benchmarks.

Every POST is checked with the `standardwebhooks` package from PyPI (an implementation
independent of ours) against the secrets given via POST /_secrets, and recorded; GET /_log
returns the record. The path chooses how it answers:

  /ok                   200
  /status/<code>        that status
  /flaky/<n>            500 for the first n requests of each webhook-id, then 200
  /retry-after/<s>      429 with Retry-After: <s> for the first request of each id, then 200
  /slow/<ms>            waits, then 200
  /redirect             302 to /ok
  /huge                 200 with a 5 MB body

Usage: webhook-receiver.py [--port N] [--quiet]; prints "PORT <n>" when listening.
"""
import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

lock = threading.Lock()
log = []
secrets = []
seen = {}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", headers=None):
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/_log":
            with lock:
                body = json.dumps(log).encode()
            self.reply(200, body, {"Content-Type": "application/json"})
        elif self.path == "/_reset":
            with lock:
                log.clear()
                seen.clear()
            self.reply(200)
        else:
            self.reply(200, b"ok")

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if self.path == "/_secrets":
            with lock:
                secrets[:] = json.loads(body)["secrets"]
            self.reply(200)
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        webhook_id = headers.get("webhook-id", "")
        verified_by = []
        with lock:
            current = list(secrets)
        for index, secret in enumerate(current):
            try:
                Webhook(secret).verify(body, headers)
                verified_by.append(index)
            except WebhookVerificationError:
                pass
        with lock:
            count = seen.get((self.path, webhook_id), 0) + 1
            seen[(self.path, webhook_id)] = count
        parts = self.path.strip("/").split("/")
        status, reply_headers, reply_body = 200, {}, b"ok"
        if parts[0] == "status":
            status = int(parts[1])
        elif parts[0] == "flaky":
            status = 500 if count <= int(parts[1]) else 200
        elif parts[0] == "retry-after":
            if count == 1:
                status, reply_headers = 429, {"Retry-After": parts[1]}
        elif parts[0] == "slow":
            time.sleep(int(parts[1]) / 1000)
        elif parts[0] == "redirect":
            status, reply_headers = 302, {"Location": "/ok"}
        elif parts[0] == "huge":
            reply_body = b"x" * (5 * 1024 * 1024)
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        with lock:
            log.append({
                "path": self.path, "id": webhook_id, "timestamp": headers.get("webhook-timestamp"),
                "signature": headers.get("webhook-signature"), "verified_by": verified_by,
                "status": status, "received_at": time.time(), "body": parsed,
            })
        self.reply(status, reply_body, reply_headers)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    arguments = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", arguments.port), Handler)
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
