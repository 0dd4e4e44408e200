#!/usr/bin/env python3
"""A real webhook receiver for subsync's tests, benchmarks and the README's first run.

Every POST is checked against the secrets given via POST /_secrets, and recorded; GET /_log
returns the record. The check is the `standardwebhooks` package from PyPI (an implementation
independent of ours, in the project's .venv/) when it is installed, else the Standard Webhooks
rule written out below with the standard library only, so the README's first run needs no
Python package. --verifier standardwebhooks (what the tests pass) refuses to start without the
package; each record names the verifier that checked it. The path chooses how it answers:

  /ok                   200
  /status/<code>        that status
  /flaky/<n>            500 for the first n requests of each webhook-id, then 200
  /chaos/<percent>      500 with that probability, else 200
  /retry-after/<s>      429 with Retry-After: <s> for the first request of each id, then 200
  /slow/<ms>            waits, then 200
  /redirect             302 to /ok
  /huge                 200 with a 5 MB body
  /nul                  200 with a body of one NUL byte
  /binary               200 with a 1 MiB binary body (every byte value, NUL included)

For fault injection (scripts/faults), POST /_mode {"mode": "ok" | "500" | "slow:<ms>"} makes
every webhook path answer 500, or wait <ms> and then answer 200, until set back to "ok".

Usage: webhook-receiver.py [--port N] [--quiet] [--secret S ...] [--log-file F] [--compact]
                          [--verifier auto|standardwebhooks|builtin]
prints "PORT <n>" when listening. --secret sets the verification secrets from the start (as
POST /_secrets would), so a receiver restarted on the same port verifies at once. --log-file
appends each record as one JSON line (flushed), so the record survives the process being
killed; --compact leaves the bodies out of the records and keeps data.account_id,
data.sequence and type instead.
"""
import argparse
import base64
import hashlib
import hmac
import json
import os
import random
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

try:
    from standardwebhooks.webhooks import Webhook, WebhookVerificationError
except ImportError:  # the README's first run, with the system's Python alone
    Webhook = None

lock = threading.Lock()
log = []
secrets = []
seen = {}
mode = ["ok"]
options = None
log_file = None


def builtin_verify(secret, body, headers):
    """Standard Webhooks (v1), as strictly as the reference library: base64(HMAC-SHA256(key,
    "<id>.<timestamp>.<body>")) among the header's space-separated "v1,<signature>" entries (one
    malformed entry fails the whole check), the timestamp whole seconds within five minutes and
    signed in its canonical form, the body UTF-8."""
    key = base64.b64decode(secret[len("whsec_"):] if secret.startswith("whsec_") else secret)
    webhook_id, timestamp = headers.get("webhook-id", ""), headers.get("webhook-timestamp", "")
    if not webhook_id or not timestamp.isdigit() or abs(time.time() - int(timestamp)) > 300:
        return False
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    signed = f"{webhook_id}.{int(timestamp)}.{text}".encode()
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    entries = [entry.split(",") for entry in headers.get("webhook-signature", "").split(" ")]
    if any(len(entry) != 2 for entry in entries):
        return False
    return any(version == "v1" and hmac.compare_digest(signature, expected) for version, signature in entries)


def verify(secret, body, headers):
    if options.verifier == "builtin":
        return builtin_verify(secret, body, headers)
    try:
        Webhook(secret).verify(body, headers)
        return True
    except Exception:  # noqa: BLE001 - a malformed header or body is a failed check, not a crash
        return False


class Server(ThreadingHTTPServer):
    # The default listen backlog (5) drops the SYNs of a burst of new connections (several
    # delivery loops opening theirs at once), and each dropped SYN costs the sender 1 s, 2 s, ...
    request_queue_size = 1024
    daemon_threads = True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        # The status line and headers, then the body, are two writes: without TCP_NODELAY the
        # second waits for the sender's delayed ACK (~40 ms a request on Linux).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

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
        if self.path == "/_mode":
            with lock:
                mode[0] = json.loads(body)["mode"]
            self.reply(200)
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        webhook_id = headers.get("webhook-id", "")
        verified_by = []
        with lock:
            current = list(secrets)
        for index, secret in enumerate(current):
            if verify(secret, body, headers):
                verified_by.append(index)
        with lock:
            count = seen.get((self.path, webhook_id), 0) + 1
            seen[(self.path, webhook_id)] = count
        parts = self.path.strip("/").split("/")
        status, reply_headers, reply_body = 200, {}, b"ok"
        if parts[0] == "status":
            status = int(parts[1])
        elif parts[0] == "flaky":
            status = 500 if count <= int(parts[1]) else 200
        elif parts[0] == "chaos":
            status = 500 if random.random() * 100 < float(parts[1]) else 200
        elif parts[0] == "retry-after":
            if count == 1:
                status, reply_headers = 429, {"Retry-After": parts[1]}
        elif parts[0] == "slow":
            time.sleep(int(parts[1]) / 1000)
        elif parts[0] == "redirect":
            status, reply_headers = 302, {"Location": "/ok"}
        elif parts[0] == "huge":
            reply_body = b"x" * (5 * 1024 * 1024)
        elif parts[0] == "nul":
            reply_body = b"\x00"
        elif parts[0] == "binary":
            reply_body = bytes(range(256)) * 4096
        with lock:
            current_mode = mode[0]
        slept = 0.0
        if current_mode == "500":
            status, reply_headers, reply_body = 500, {}, b"injected failure"
        elif current_mode.startswith("slow:"):
            slept = int(current_mode[5:]) / 1000
            time.sleep(slept)
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        record = {
            "path": self.path, "id": webhook_id, "timestamp": headers.get("webhook-timestamp"),
            "signature": headers.get("webhook-signature"), "verified_by": verified_by, "verifier": options.verifier,
            "status": status, "received_at": time.time(), "mode": current_mode,
        }
        if options.compact:
            data = parsed.get("data") if isinstance(parsed, dict) else None
            data = data if isinstance(data, dict) else {}
            record.update({"type": parsed.get("type") if isinstance(parsed, dict) else None,
                           "account_id": data.get("account_id"), "sequence": data.get("sequence"),
                           "event_id": data.get("id")})
        else:
            record["body"] = parsed
        with lock:
            log.append(record)
            if log_file is not None:
                log_file.write(json.dumps(record) + "\n")
                log_file.flush()
        try:
            self.reply(status, reply_body, reply_headers)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the sender gave up (its timeout); the record says what was answered


def main():
    global options, log_file
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--secret", action="append", default=[])
    parser.add_argument("--log-file")
    parser.add_argument("--compact", action="store_true")
    parser.add_argument("--mode", default="ok")
    parser.add_argument("--verifier", choices=["auto", "standardwebhooks", "builtin"], default="auto")
    arguments = parser.parse_args()
    if arguments.verifier == "auto":
        arguments.verifier = "builtin" if Webhook is None else "standardwebhooks"
    elif arguments.verifier == "standardwebhooks" and Webhook is None:
        parser.error("--verifier standardwebhooks: the package is not installed (scripts/setup --test puts it in .venv/)")
    options = arguments
    secrets[:] = arguments.secret
    mode[0] = arguments.mode
    if arguments.log_file:
        log_file = open(arguments.log_file, "a", encoding="utf-8")
    # A parent that blocks or ignores SIGTERM (as a service with its own signal handling does)
    # passes that on to its children: take the defaults back, so terminating this process works.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # Exit with the process that started this one (a test run or scripts/faults), so no receiver
    # outlives it even when it never stops us.
    parent = os.getppid()

    def watch_parent():
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch_parent, daemon=True).start()
    server = Server(("127.0.0.1", arguments.port), Handler)
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
