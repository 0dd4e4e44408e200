"""Probes and faults: the readiness prober, and the fault schedule (SIGKILL of a serve process, the
database restarted, a receiver failing, the App Store's outage ending)."""
import threading
import time
from collections import Counter

from clusters import CitusCluster, psql
from common import SLOW_MS, WEBHOOK_TIMEOUT_MS, say
from http_requests import http_request
from store_double import STORE_RETRY_AFTER


class Prober:
    """GET /readyz on every live serve twice a second: answers must come, 200 or 503 + Retry-After."""

    def __init__(self, serves, record):
        self.serves, self.record = serves, record
        self.stop = threading.Event()
        self.seen = Counter()

    def run(self):
        while not self.stop.is_set():
            for serve in self.serves:
                if not serve.up:
                    continue
                status, headers, data = http_request(serve.port, "GET", "/readyz", timeout=5)
                if not serve.up:
                    continue
                self.record.count("readyz", status)
                if status == 200:
                    self.seen["200"] += 1
                elif status == 503 and headers.get("retry-after"):
                    self.seen["503"] += 1
                    if not self.record.db_fault_active():
                        self.seen["503 outside a database fault"] += 1
                else:
                    self.seen[str(status)] += 1
                    self.record.unexpected_answer(f"readyz {serve.name}: {status} {data[:200]!r}")
            self.stop.wait(0.5)


def run_faults(profile, serves, receivers, pg, record, load_started, stop, store=None):
    """The fault schedule, in its own thread. Returns via the `done` list of what happened."""
    events = []

    def at(seconds):
        pause = load_started + seconds - time.time()
        if pause > 0:
            stop.wait(pause)
        return not stop.is_set()

    plan = []
    for n, t in enumerate(profile["kill"]):
        plan.append((t, "kill", serves[(n + 1) % len(serves)]))
    if profile.get("pg_restart") is not None:
        plan.append((profile["pg_restart"], "pg", None))
    if profile.get("receiver") is not None:
        plan.append((profile["receiver"], "receiver", receivers[-1]))
    if store is not None and profile.get("store") is not None:
        plan.append((profile["store"], "store", store))
    plan.sort(key=lambda p: p[0])
    for t, what, target in plan:
        if not at(t):
            return events
        if what == "kill":
            # Mid-batch: wait (briefly) until there is work in flight.
            for _ in range(30):
                rows = psql(pg.url, "SELECT count(*) FROM reports WHERE status = 'pending'")
                if rows[0][0] != "0":
                    break
                time.sleep(0.1)
            say(f"fault: SIGKILL serve {target.name} (pid {target.process.pid}; {rows[0][0]} reports pending)")
            target.kill()
            stop.wait(2)
            target.start()
            say(f"fault: serve {target.name} restarted (pid {target.process.pid})")
            events.append(f"SIGKILL serve {target.name} at {t}s with {rows[0][0]} reports pending; restarted")
        elif what == "pg":
            say("fault: Citus worker node killed" if isinstance(pg, CitusCluster) else "fault: PostgreSQL fast shutdown")
            with record.lock:
                record.fault_windows.append([time.time(), None])
            pg.stop("fast")
            stop.wait(profile["pg_down"])
            pg.start()
            with record.lock:
                record.fault_windows[-1][1] = time.time()
            what_down = "Citus worker node" if isinstance(pg, CitusCluster) else "PostgreSQL"
            say(f"fault: {what_down} started again")
            events.append(f"{what_down} restarted at {t}s, down {profile['pg_down']} s")
        elif what == "receiver":
            phase = profile["receiver_phase"]
            say(f"fault: receiver {target.name} answers 500")
            target.post("/_mode", {"mode": "500"})
            stop.wait(phase)
            say(f"fault: receiver {target.name} answers after {SLOW_MS} ms (delivery timeout {WEBHOOK_TIMEOUT_MS} ms)")
            target.post("/_mode", {"mode": f"slow:{SLOW_MS}"})
            stop.wait(phase)
            say(f"fault: receiver {target.name} killed: connections refused")
            target.kill()
            stop.wait(phase)
            target.start()
            say(f"fault: receiver {target.name} back")
            events.append(f"receiver {target.name}: 500s {phase} s, timeouts {phase} s, refused {phase} s from {t}s")
        elif what == "store":
            target.recover()
            say(f"fault: the App Store's notification history is back (after a 429 of {STORE_RETRY_AFTER:.0f} s)")
            events.append(f"App Store notification history: 500s from the start to {t}s, then a 429 with Retry-After, then "
                          f"{target.expected_notifications} notifications on two pages")
    return events
