"""The `subsync serve` processes, and the resident memory of a process."""
import os
import signal
import time

from common import Failure, registry, tail
from http_requests import http_request


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Serve:
    """One `subsync serve` incarnation on a fixed port."""

    def __init__(self, name, port, binary, env, workdir):
        self.name, self.port, self.binary, self.env, self.workdir = name, port, binary, env, workdir
        self.process = None
        self.incarnations = []      # (process, killed_on_purpose)
        self.down_since = None

    def start(self):
        log = os.path.join(self.workdir, f"serve-{self.name}-{len(self.incarnations) + 1}.log")
        self.process = registry.spawn([self.binary, "serve", "--port", str(self.port), "--no-migrate"], log, env=self.env)
        self.incarnations.append([self.process, False, log])
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise Failure(f"serve {self.name} exited with {self.process.returncode} at start:\n{tail(log)}")
            status, _, _ = http_request(self.port, "GET", "/healthz", timeout=2)
            if status == 200:
                self.down_since = None
                return
            time.sleep(0.1)
        raise Failure(f"serve {self.name} did not answer /healthz in 60 s:\n{tail(log)}")

    def kill(self):
        self.down_since = time.time()
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        self.incarnations[-1][1] = True

    @property
    def up(self):
        return self.process is not None and self.process.poll() is None and self.down_since is None
