"""What every part of a faults run shares: its constants and load profiles, the clock of its log
lines (`say`), the failure it stops on, and the registry of every child process it starts."""
import os
import signal
import socket
import subprocess
import sys
import threading
import time


# The repository (this file is scripts/faults.d/common.py).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ADMIN_KEY = "faults-admin-key-0123456789abcdef"
TOKEN_SECRET = "faults-token-secret-0123456789abcdef-0123456789"
CLIENT_TIMEOUT = 15.0          # a request without an answer in this time "hung"
WEBHOOK_TIMEOUT_MS = 1500      # the delivery timeout given to serve
SLOW_MS = 3000                 # the failing receiver's "timeout" phase answers after this
RETRY_SCHEDULE = ",".join(["1", "1", "2", "2"] + ["3"] * 40)  # ~2 minutes of retries

PROFILES = {
    # devices, load seconds, requests/s, fault times (s after load start)
    "short": dict(devices=300, seconds=40, rate=100, kill=[4], pg_restart=12, pg_down=4,
                  receiver=22, receiver_phase=5, store=8, threads=12, schemathesis_examples=12),
    "full": dict(devices=3000, seconds=150, rate=180, kill=[15, 115], pg_restart=45, pg_down=8,
                 receiver=75, receiver_phase=12, store=30, threads=24, schemathesis_examples=40),
}

log_lock = threading.Lock()
started_at = time.time()     # when scripts/faults imported this module: the clock of `say` and the run's total


def say(message):
    with log_lock:
        print(f"[{time.time() - started_at:7.1f}s] {message}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Failure(Exception):
    pass


# ---------------------------------------------------------------- processes


class Registry:
    """Every child process, so that all of them are stopped whatever happens."""

    def __init__(self):
        self.processes = []
        self.cleanups = []

    def spawn(self, args, log_path, env=None):
        log = open(log_path, "ab")
        process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=env, start_new_session=True, cwd=ROOT)
        log.close()
        self.processes.append(process)
        return process

    def stop_all(self):
        for process in self.processes:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for cleanup in reversed(self.cleanups):
            try:
                cleanup()
            except Exception as error:  # noqa: BLE001 - cleanup must go on
                print(f"cleanup: {error}", file=sys.stderr)


registry = Registry()


def on_signal(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def tail(path, lines=30):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""
