"""The webhook receivers (Tests/Doubles/webhook-receiver.py), one process each."""
import json
import os
import signal
import socket
import sys
import time

from common import ROOT, Failure, free_port, registry
from http_requests import http_request


class Receiver:
    def __init__(self, name, workdir):
        self.name = name
        self.port = free_port()
        self.workdir = workdir
        self.log_file = os.path.join(workdir, f"receiver-{name}.jsonl")
        self.process = None
        self.secret = None
        self.incarnations = []

    def start(self):
        args = [sys.executable, os.path.join(ROOT, "Tests/Doubles/webhook-receiver.py"), "--port", str(self.port),
                "--compact", "--log-file", self.log_file]
        if self.secret:
            args += ["--secret", self.secret]
        self.process = registry.spawn(args, os.path.join(self.workdir, f"receiver-{self.name}.out"))
        self.incarnations.append([self.process, False])
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise Failure(f"receiver {self.name} exited at start")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.05)
        raise Failure(f"receiver {self.name} did not listen in 20 s")

    def kill(self):
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        self.incarnations[-1][1] = True

    def post(self, path, document):
        status, _, _ = http_request(self.port, "POST", path, body=json.dumps(document).encode(), timeout=5)
        if status != 200:
            raise Failure(f"receiver {self.name} {path}: {status}")

    def records(self):
        records = []
        try:
            with open(self.log_file) as f:
                for line in f:
                    try:
                        records.append(json.loads(line))
                    except ValueError:
                        pass  # a line cut by the kill
        except OSError:
            pass
        return records
