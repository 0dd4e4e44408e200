"""The command line (scripts/faults is its entry point, with the usage text) and the run: set up,
load under faults, check, report."""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter

import report
from chaos import Prober, run_faults
from checks import check_drift, check_events, check_reports, sabotage, stop_and_count_crashes, wait_quiet
from clusters import CitusCluster, Postgres, psql
from common import (ADMIN_KEY, CLIENT_TIMEOUT, PROFILES, RETRY_SCHEDULE, ROOT, TOKEN_SECRET, WEBHOOK_TIMEOUT_MS, Failure,
                    free_port, on_signal, registry, say)
from fuzz import run_schemathesis
from hostile import Hostile
from http_requests import http_request, raw_request
from load import Load
from receivers import Receiver
from record import Record
from services import Serve, rss_kib
from store_double import STORE_ACCOUNTS, STORE_KEY, StoreDouble


def main(usage):
    parser = argparse.ArgumentParser(description=usage, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--short", action="store_true", help="the CI version")
    parser.add_argument("--minutes", type=float, help="soak: minutes of load; reports RSS of the serve processes")
    parser.add_argument("--schemathesis-only", action="store_true")
    parser.add_argument("--no-schemathesis", action="store_true")
    parser.add_argument("--devices", type=int)
    parser.add_argument("--bin", default=os.environ.get("SUBSYNC_BIN", os.path.join(ROOT, ".build/debug/subsync")))
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs)")
    parser.add_argument("--seed", type=int, default=int(os.environ.get("FAULTS_SEED", "42")))
    parser.add_argument("--citus", action="store_true",
                        help="run on a Citus coordinator and two workers; the database fault kills a worker node")
    parser.add_argument("--sabotage", choices=["report", "drift", "event", "order"],
                        help="break one thing before the checks, to see them fail")
    options = parser.parse_args()

    profile = dict(PROFILES["short" if options.short else "full"])
    soak = options.minutes is not None
    if soak:
        seconds = int(options.minutes * 60)
        profile.update(seconds=seconds, kill=[], rate=120, devices=options.devices or 2000,
                       pg_restart=int(seconds * 0.4), receiver=int(seconds * 0.6), receiver_phase=8,
                       store=int(seconds * 0.2))
    if options.devices:
        profile["devices"] = options.devices
    if not os.access(options.bin, os.X_OK):
        print(f"faults: no executable at {options.bin}; build with `swift build` (or pass --bin)", file=sys.stderr)
        return 1

    signal.signal(signal.SIGTERM, on_signal)
    workdir = tempfile.mkdtemp(prefix="subsync-faults.")
    say(f"faults: {'short' if options.short else 'soak' if soak else 'full'} run, logs in {workdir}")
    try:
        return run(options, profile, soak, workdir)
    except KeyboardInterrupt as interrupt:
        print(f"faults: interrupted ({interrupt}); stopping everything", file=sys.stderr)
        return 130
    except Failure as failure:
        print(f"faults: FAILED: {failure}", file=sys.stderr)
        print("faults: reports accepted=? lost=? · events=? lost=? out_of_order=? · drift=? · unexpected_5xx=? · crashes=?")
        return 1
    finally:
        registry.stop_all()
        if options.keep:
            print(f"faults: logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def run(options, profile, soak, workdir):
    pg = CitusCluster(workdir) if options.citus else Postgres(workdir)
    pg.init()
    say(f"{'Citus coordinator' if options.citus else 'PostgreSQL'} at {pg.url}")
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("SUBSYNC_") and k != "DATABASE_URL"}
    base_env.update({
        "DATABASE_URL": pg.url, "SUBSYNC_HOST": "127.0.0.1", "SUBSYNC_ADMIN_KEY": ADMIN_KEY,
        "SUBSYNC_TOKEN_SECRET": TOKEN_SECRET, "SUBSYNC_WORKERS": "2", "SUBSYNC_DELIVERY_WORKERS": "2",
        "SUBSYNC_WEBHOOK_ALLOW": "127.0.0.0/8", "SUBSYNC_WEBHOOK_RETRY_SCHEDULE": RETRY_SCHEDULE,
        "SUBSYNC_WEBHOOK_TIMEOUT_MS": str(WEBHOOK_TIMEOUT_MS), "SUBSYNC_RATE_LIMIT_ACCOUNT": "off",
        "SUBSYNC_RATE_LIMIT_DEVICE": "off", "SUBSYNC_LOG_LEVEL": "warning",
        # Durability, not signatures: device reports are sent unsigned.
        "SUBSYNC_REQUIRE_SIGNED": "false",
    })
    # The App Store (issue #51): a double of its Server API whose notification history fails and
    # recovers, and a chain of our own that signs what it serves (trusted by serve, so the
    # notifications route is configured for schemathesis too). Needs Apple's published test key.
    store = None
    if os.path.exists(STORE_KEY):
        store = StoreDouble(workdir, options.seed)
        base_env.update(store.env())
        say(f"App Store double on :{store.port} (notification history answers 500 until {profile.get('store')} s into the load)")
    else:
        say(f"faults: no {STORE_KEY}: the App Store part is left out")
    result = subprocess.run([options.bin, "migrate"], capture_output=True, text=True, env=base_env, timeout=120)
    if result.returncode != 0:
        raise Failure(f"subsync migrate: {result.stderr}")
    if options.citus:
        result = subprocess.run([options.bin, "distribute"], capture_output=True, text=True, env=base_env, timeout=300)
        if result.returncode != 0:
            raise Failure(f"subsync distribute: {result.stderr}")
        say("distributed by account (subsync distribute)")
    serves = [Serve(name, free_port(), options.bin, dict(base_env), workdir) for name in ("A", "B")]
    for serve in serves:
        serve.start()
    say("serve A on :%d, serve B on :%d" % (serves[0].port, serves[1].port))

    if options.schemathesis_only:
        code, output = run_schemathesis(serves[0].port, profile["schemathesis_examples"], workdir,
                                        "SUBSYNC_APPLE_ROOT_CERTIFICATES" in base_env)
        print(output[-6000:] if output else "")
        return 0 if code == 0 else 1

    record = Record()
    receivers = [Receiver(name, workdir) for name in ("r1", "r2", "r3")]
    endpoint_ids = {}
    for receiver in receivers:
        receiver.start()
        status, _, data = http_request(serves[0].port, "POST", "/v1/webhook-endpoints",
                                       json.dumps({"url": f"http://127.0.0.1:{receiver.port}/ok",
                                                   "description": f"faults {receiver.name}"}).encode(),
                                       {"Authorization": f"Bearer {ADMIN_KEY}", "Content-Type": "application/json"})
        if status != 201:
            raise Failure(f"creating an endpoint: {status} {data[:300]!r}")
        document = json.loads(data)
        receiver.secret = document["secret"]
        endpoint_ids[receiver.name] = document["id"]
        receiver.post("/_secrets", {"secrets": [receiver.secret]})
    say("receivers " + ", ".join(f"{r.name} on :{r.port}" for r in receivers) + ", one endpoint each, all event types")
    if store is not None:
        store.create_accounts(serves[0], record)
        say(f"{STORE_ACCOUNTS} accounts for the App Store's notifications, each with a device's expired pass")

    rss_start = {s.name: rss_kib(s.process.pid) for s in serves}
    rss_samples = []
    load = Load(serves, record, profile["devices"], profile["rate"], profile["threads"], options.seed)
    hostile = Hostile(serves, record, pause=0.05 if not soak else 0.2)
    prober = Prober(serves, record)
    stop_faults = threading.Event()
    say(f"load: {profile['devices']} devices ({len(load.plan)} accounts), {profile['rate']} requests/s for "
        f"{profile['seconds']} s, {profile['threads']} client threads; hostile requests and readiness probes throughout")
    threads = [threading.Thread(target=load.worker, args=(n,), daemon=True) for n in range(profile["threads"])]
    for thread in threads:
        thread.start()
    side = [threading.Thread(target=hostile.run, daemon=True), threading.Thread(target=prober.run, daemon=True)]
    for thread in side:
        thread.start()
    load_started = time.time()
    fault_log = []
    fault_thread = threading.Thread(
        target=lambda: fault_log.extend(run_faults(profile, serves, receivers, pg, record, load_started, stop_faults, store)),
        daemon=True)
    fault_thread.start()
    producer = threading.Thread(target=load.producer, args=(profile["seconds"],), daemon=True)
    producer.start()
    while producer.is_alive():
        producer.join(timeout=10 if not soak else 30)
        if soak:
            rss_samples.append((round(time.time() - load_started), {s.name: rss_kib(s.process.pid) for s in serves}))
            say("RSS " + ", ".join(f"{n}: {v / 1024:.0f} MiB" for n, v in rss_samples[-1][1].items() if v))
        else:
            say(f"load: {record.requests} answered, {len(record.accepted)} reports accepted")
    for thread in threads:
        thread.join(timeout=CLIENT_TIMEOUT * 8)
    fault_thread.join(timeout=120)
    if fault_thread.is_alive():
        raise Failure("the fault schedule did not finish")
    hostile.stop.set()
    prober.stop.set()
    for thread in side:
        thread.join(timeout=CLIENT_TIMEOUT + 5)
    rss_end = {s.name: rss_kib(s.process.pid) for s in serves}
    burst = None
    if soak:
        # Oversized bodies from clients that half-close after sending (reported, not asserted):
        # RSS of serve A before and after 300 of them, all answered 413.
        build = next(c[1] for c in hostile.cases if c[0] == "2 MiB body")
        before = rss_kib(serves[0].process.pid)
        answers = Counter(raw_request(serves[0].port, build())[0] for _ in range(300))
        burst = (before, rss_kib(serves[0].process.pid), dict(answers))
    load_seconds = time.time() - load_started
    say(f"load done in {load_seconds:.0f} s: {record.requests} answered requests, {len(record.accepted)} reports accepted, "
        f"{hostile.sent} hostile requests")

    store_applied = store.wait_applied(pg, limit=240) if store is not None and store.recovered_at is not None else False
    quiet = wait_quiet(pg, limit=300)
    if options.sabotage:
        sabotage(options.sabotage, pg, record, receivers)
    missing, unresolved, report_statuses = check_reports(pg, record)
    drift, drift_examples, drift_summary, _ = check_drift(options.bin, base_env)
    events = check_events(pg, receivers, endpoint_ids)
    dead = psql(pg.url, "SELECT count(*) FROM deliveries WHERE status = 'dead'")[0][0]
    # Rejected requests store nothing: the hostile account holds only what 2xx answers accepted
    # (plus at most one request's reports per 503, which may come after the commit).
    hostile_stored = int(psql(pg.url, "SELECT count(*) FROM reports WHERE account_id = 'hostile-acct'")[0][0])
    hostile_503 = sum(answers.get(503, 0) for answers in hostile.by_case.values())
    store_lines, store_problems = store.check(pg, serves[0], store_applied) if store is not None and store.recovered_at is not None else ([], [])
    crashes = stop_and_count_crashes(serves, receivers)
    if not pg.alive():
        crashes.append("PostgreSQL is not running")

    # ------------------------------------------------------------ report (report.py)
    report.print_findings(
        fault_log=fault_log, record=record, prober=prober, hostile=hostile, hostile_stored=hostile_stored,
        report_statuses=report_statuses, missing=missing, unresolved=unresolved, quiet=quiet, drift=drift,
        drift_summary=drift_summary, drift_examples=drift_examples, events=events, dead=dead, soak=soak,
        rss_samples=rss_samples, rss_start=rss_start, rss_end=rss_end, burst=burst, store=store,
        store_lines=store_lines, crashes=crashes)
    problems = report.collect_problems(
        options=options, profile=profile, workdir=workdir, record=record, prober=prober, hostile=hostile,
        hostile_stored=hostile_stored, hostile_503=hostile_503, quiet=quiet, events=events, dead=dead, store=store,
        store_problems=store_problems)

    schemathesis_failed = False
    if not options.no_schemathesis and not soak:
        serve = serves[0]
        serve.incarnations.clear()
        serve.start()
        say(f"schemathesis against serve A (restarted) from GET /openapi.yaml, {profile['schemathesis_examples']} examples per operation")
        code, output = run_schemathesis(serve.port, profile["schemathesis_examples"], workdir,
                                        "SUBSYNC_APPLE_ROOT_CERTIFICATES" in base_env)
        print("== schemathesis")
        lines = (output or "").splitlines()
        start = next((i for i, line in enumerate(lines) if "SUMMARY" in line), max(0, len(lines) - 25))
        print("\n".join(f"  {line}" for line in lines[start + 1:] if line.strip() and "Reports:" not in line and "JUnit" not in line))
        if code != 0:
            schemathesis_failed = True
            problems.append(f"schemathesis failed (exit {code}); output in {workdir}/schemathesis.txt")
            print(output[-8000:])
        serve.process.send_signal(signal.SIGTERM)
        serve.process.wait(timeout=30)

    del schemathesis_failed
    return report.print_verdict(problems=problems, missing=missing, unresolved=unresolved, record=record,
                                events=events, drift=drift, crashes=crashes)
