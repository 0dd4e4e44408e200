"""The checks after the load: the inbox and outbox drained, every accepted report stored and resolved,
no drift, every event at every receiver in order, no crash; and the sabotage that shows they fail."""
import json
import signal
import subprocess
import time
from collections import Counter, defaultdict

from clusters import psql
from common import ROOT, Failure, say, tail


def wait_quiet(pg, limit):
    say("waiting until no report and no delivery is pending")
    deadline = time.time() + limit
    last = 0
    while time.time() < deadline:
        pending, deliveries = psql(pg.url, "SELECT (SELECT count(*) FROM reports WHERE status = 'pending'), "
                                           "(SELECT count(*) FROM deliveries WHERE status = 'pending')")[0]
        if pending == "0" and deliveries == "0":
            return True
        if time.time() - last > 10:
            say(f"  pending reports {pending}, pending deliveries {deliveries}")
            last = time.time()
        time.sleep(1)
    return False


def check_reports(pg, record):
    stored = {}
    for account, report_id, status in psql(pg.url, "SELECT account_id, report_id, status FROM reports"):
        stored[(account, report_id)] = status
    missing = [key for key in record.accepted if key not in stored]
    unresolved = [key for key in record.accepted if key in stored and stored[key] != "resolved"]
    return missing, unresolved, Counter(stored.values())


def check_drift(binary, env):
    result = subprocess.run([binary, "reconcile", "--all", "--dry-run", "--json", "--no-progress"],
                            capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    if result.returncode not in (0, 2):
        raise Failure(f"reconcile failed ({result.returncode}): {result.stderr[-2000:]}")
    document = json.loads(result.stdout)
    differences = document.get("differences", [])
    return len(differences), differences[:5], document.get("summary", {}), result.returncode


def check_events(pg, receivers, endpoint_ids):
    events = {}
    for account, sequence, event_id in psql(pg.url, "SELECT account_id, sequence, event_id FROM events"):
        events[event_id] = (account, int(sequence))
    last = defaultdict(int)
    for account, sequence in events.values():
        last[account] = max(last[account], sequence)
    deliveries = Counter()
    for endpoint_id, status, count in psql(pg.url, "SELECT endpoint_id, status, count(*) FROM deliveries GROUP BY 1, 2"):
        deliveries[(endpoint_id.lower(), status)] = int(count)
    result = {"events": len(events), "receivers": {}, "lost_events": set(), "mismatches": 0, "bad_signatures": 0}
    for receiver in receivers:
        records = receiver.records()
        delivered = {}
        order = defaultdict(list)
        bad = 0
        # Sent early: a request for sequence s before every sequence below s had been answered
        # 2xx at this receiver, i.e. a sender went past a pending event of the same account.
        acknowledged = defaultdict(set)
        contiguous = defaultdict(int)
        sent_early = set()
        for r in records:
            if not r.get("verified_by"):
                bad += 1
                continue
            account, sequence = r.get("account_id"), r.get("sequence")
            if isinstance(sequence, int):
                if sequence - 1 > contiguous[account]:
                    sent_early.add(account)
                if r.get("mode") == "ok" and 200 <= r.get("status", 0) < 300:
                    acknowledged[account].add(sequence)
                    while contiguous[account] + 1 in acknowledged[account]:
                        contiguous[account] += 1
            if r.get("mode") != "ok" or not (200 <= r.get("status", 0) < 300):
                continue
            if r["id"] not in delivered:
                delivered[r["id"]] = (r.get("account_id"), r.get("sequence"))
                order[r.get("account_id")].append(r.get("sequence"))
        lost = [e for e in events if e not in delivered]
        mismatched = [e for e in events if e in delivered and delivered[e] != events[e]]
        gaps = 0
        unordered = 0
        for account, top in last.items():
            seen = {s for s in order.get(account, []) if s is not None and s <= top}
            if seen != set(range(1, top + 1)):
                gaps += 1
            arrived = [s for s in order.get(account, []) if s is not None and s <= top]
            if arrived != sorted(arrived):
                unordered += 1
        result["lost_events"].update(lost)
        result["mismatches"] += len(mismatched)
        result["bad_signatures"] += bad
        endpoint = endpoint_ids[receiver.name].lower()
        result["receivers"][receiver.name] = {
            "requests": len(records), "delivered": len(delivered), "lost": len(lost), "bad_signatures": bad,
            "duplicates": sum(1 for r in records if r.get("verified_by") and r.get("mode") == "ok"
                              and 200 <= r.get("status", 0) < 300) - len(delivered),
            "accounts_with_gaps": gaps, "accounts_out_of_order": unordered, "accounts_sent_early": len(sent_early),
            "accounts": len(last),
            "deliveries": {status: deliveries[(endpoint, status)] for status in ("succeeded", "pending", "dead", "cancelled")
                           if deliveries[(endpoint, status)]},
        }
    return result


def sabotage(what, pg, record, receivers):
    """Breaks one thing on purpose before the checks, to show that they catch it."""
    say(f"sabotage: {what}")
    if what == "report":
        account, report_id = sorted(record.accepted)[0]
        psql(pg.url, f"DELETE FROM reports WHERE account_id = '{account}' AND report_id = '{report_id}'")
    elif what == "drift":
        psql(pg.url, "UPDATE account_states SET tier = 'business' WHERE account_id = "
                     "(SELECT account_id FROM account_states WHERE tier = 'free' ORDER BY account_id LIMIT 1)")
    elif what == "order":
        # Two events of one account swap places in the first receiver's record.
        records = receivers[0].records()
        firsts = {}
        for index, r in enumerate(records):
            if r.get("mode") == "ok" and 200 <= r.get("status", 0) < 300 and r.get("sequence") in (1, 2):
                firsts.setdefault((r.get("account_id"), r["sequence"]), index)
        account = next(a for (a, s) in firsts if s == 2 and (a, 1) in firsts)
        one, two = firsts[(account, 1)], firsts[(account, 2)]
        records[one], records[two] = records[two], records[one]
        with open(receivers[0].log_file, "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
    elif what == "event":
        records = receivers[0].records()
        victim = records[0]["id"]
        with open(receivers[0].log_file, "w") as f:
            for r in records:
                if r["id"] != victim:
                    f.write(json.dumps(r) + "\n")


def stop_and_count_crashes(serves, receivers):
    crashes = []
    for serve in serves:
        for process, killed, log in serve.incarnations:
            code = process.poll()
            if killed:
                if code != -signal.SIGKILL:
                    crashes.append(f"serve {serve.name} pid {process.pid}: killed on purpose but exit {code}")
            elif code is not None:
                crashes.append(f"serve {serve.name} pid {process.pid}: died with {code}:\n{tail(log, 15)}")
    for serve in serves:
        process = serve.process
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for serve in serves:
        process = serve.process
        try:
            code = process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            crashes.append(f"serve {serve.name}: did not stop within 30 s of SIGTERM")
            continue
        if code != 0 and not any(c.startswith(f"serve {serve.name} pid {process.pid}") for c in crashes):
            crashes.append(f"serve {serve.name} pid {process.pid}: exit {code} after SIGTERM:\n{tail(serve.incarnations[-1][2], 15)}")
    for serve in serves:
        for _, _, log in serve.incarnations:
            text = tail(log, 400)
            if "Fatal error" in text or "Segmentation fault" in text:
                crashes.append(f"serve {serve.name}: '{log}' shows a fatal error")
    for receiver in receivers:
        for process, killed in receiver.incarnations:
            if not killed and process.poll() is not None:
                crashes.append(f"receiver {receiver.name} died with {process.returncode}")
    return crashes
