"""The report: the sections printed after the checks, the problems they add up to, and the last line."""
import os
import time

from common import started_at


def print_findings(*, fault_log, record, prober, hostile, hostile_stored, report_statuses, missing, unresolved, quiet,
                   drift, drift_summary, drift_examples, events, dead, soak, rss_samples, rss_start, rss_end, burst,
                   store, store_lines, crashes):
    """The sections from "== faults injected" to "== processes"."""
    print()
    print("== faults injected")
    for line in fault_log:
        print(f"  {line}")
    print("== requests (kind, status: count; None = connection error)")
    for kind in ("sync", "read", "feature", "hostile", "readyz"):
        row = {str(status): count for (k, status), count in sorted(record.statuses.items(), key=lambda i: str(i[0][1])) if k == kind}
        print(f"  {kind}: {row}")
    latencies = sorted(record.latencies)
    if latencies:
        print(f"  answered latency p50 {latencies[len(latencies) // 2] * 1000:.1f} ms, "
              f"p99 {latencies[int(len(latencies) * 0.99)] * 1000:.1f} ms, max {latencies[-1] * 1000:.0f} ms")
    print(f"  503 + Retry-After (tolerated; during the database restart): {dict(record.tolerated_503)}; "
          f"readyz {dict(prober.seen)}")
    if record.first_ok_after_pg is not None:
        print(f"  first 202 after PostgreSQL came back: {record.first_ok_after_pg:.2f} s")
    print(f"  connection errors to processes killed on purpose: {dict(record.connection_errors)}")
    print("== hostile requests (case: answers)")
    for name, answers in hostile.by_case.items():
        print(f"  {name}: {dict((str(k), v) for k, v in answers.items())}")
    print("== reports")
    print(f"  hostile account: {hostile_stored} reports stored, {hostile.accepted} accepted by 2xx answers "
          f"(rejected requests must store nothing)")
    print(f"  accepted (202): {len(record.accepted)}; stored by status: {dict(report_statuses)}; "
          f"missing: {len(missing)}; not resolved: {len(unresolved)}; inbox drained: {quiet}")
    for key in (missing + unresolved)[:5]:
        print(f"    e.g. {key}")
    print("== drift (subsync reconcile --all --dry-run)")
    print(f"  differences: {drift}; summary: {drift_summary}")
    for difference in drift_examples:
        print(f"    {difference}")
    print("== events and webhooks")
    print(f"  events: {events['events']}; dead deliveries: {dead}; payloads not matching the event: {events['mismatches']}")
    for name, row in events["receivers"].items():
        print(f"  receiver {name}: {row}")
    print("  asserted: every event at every receiver with a verified signature and a 2xx; per account the")
    print("  sequences, deduplicated by webhook-id, arrived first in the order 1..last (out_of_order), and no")
    print("  request came before every earlier event of its account had been answered 2xx (sent_early).")
    if soak:
        print("== memory (VmRSS of the serve processes)")
        warm = rss_samples[0][1] if rss_samples else rss_start
        for name in rss_start:
            start, end = rss_start[name], rss_end[name]
            if start and end:
                print(f"  serve {name}: start (idle) {start / 1024:.1f} MiB, after {rss_samples[0][0] if rss_samples else 0} s of load "
                      f"{warm[name] / 1024:.1f} MiB, end {end / 1024:.1f} MiB; growth {(end - start) / 1024:+.1f} MiB "
                      f"({(end - warm[name]) / 1024:+.1f} MiB since the first sample)")
        if burst:
            print(f"  300 oversized (2 MiB) half-closed requests to serve A, answers {burst[2]}: RSS {burst[0] / 1024:.1f} -> "
                  f"{burst[1] / 1024:.1f} MiB ({(burst[1] - burst[0]) / 1024:+.1f} MiB)")
        for at, sample in rss_samples:
            print(f"    at {at:4d} s: " + ", ".join(f"{n} {v / 1024:.1f} MiB" for n, v in sample.items() if v))
    if store is not None:
        print("== the App Store (notification history: outage, 429, recovery; backfilled by serve)")
        for line in store_lines:
            print(f"  {line}")
    print("== processes")
    print(f"  crashes: {len(crashes)}")
    for crash in crashes:
        print(f"    {crash}")


def collect_problems(*, options, profile, workdir, record, prober, hostile, hostile_stored, hostile_503, quiet, events,
                     dead, store, store_problems):
    """The problems the checks found (printing the examples of client mistakes answered wrongly and of
    unexpected 5xx as it goes); schemathesis may add one more."""
    problems = list(store_problems)
    if store is not None and store.recovered_at is None and not options.schemathesis_only:
        problems.append("the App Store's outage never ended (the fault schedule did not reach it)")
    if record.hostile_bad:
        problems.append(f"{len(record.hostile_bad)} client mistakes not answered 4xx with the JSON error body")
        for line in record.hostile_bad[:10]:
            print(f"    {line}")
    if record.unexpected:
        print("== unexpected 5xx and hangs")
        for line in record.unexpected[:20]:
            print(f"    {line}")
        # What the servers said about them: the error behind a 500 is only in their logs, which
        # are deleted at exit.
        for name in sorted(os.listdir(workdir)):
            if name.startswith("serve-") and name.endswith(".log"):
                with open(os.path.join(workdir, name), errors="replace") as log:
                    failed = [line.rstrip() for line in log if "request failed" in line]
                for line in failed[:5]:
                    print(f"    {name}: {line[:600]}")
    if not hostile.accepted <= hostile_stored <= hostile.accepted + hostile_503:
        problems.append(f"the hostile account holds {hostile_stored} reports, but 2xx answers accepted {hostile.accepted}")
    if not quiet:
        problems.append("the inbox or the outbox did not drain within 300 s")
    if events["bad_signatures"]:
        problems.append(f"{events['bad_signatures']} webhook requests without a valid signature")
    if events["mismatches"]:
        problems.append(f"{events['mismatches']} webhook payloads not matching their event")
    if any(row["accounts_with_gaps"] for row in events["receivers"].values()):
        problems.append("some accounts' sequences have gaps at a receiver")
    if any(row["accounts_out_of_order"] or row["accounts_sent_early"] for row in events["receivers"].values()):
        problems.append("some accounts' events reached a receiver out of sequence order")
    if dead != "0":
        problems.append(f"{dead} dead deliveries")
    if options.citus:
        # The coordinator stays up, so /readyz may stay 200 (the service is up for the accounts
        # on the other worker node); the requests that needed the dead node must have answered
        # 503 with Retry-After instead.
        if not record.tolerated_503.get("sync") and profile.get("pg_restart") is not None:
            problems.append("no sync request answered 503 + Retry-After while a worker node was down")
    elif not prober.seen.get("503") and profile.get("pg_restart") is not None:
        problems.append("readyz never answered 503 while PostgreSQL was down")
    return problems


def print_verdict(*, problems, missing, unresolved, record, events, drift, crashes):
    """The problems, the time taken and the last line, the figure; returns the exit status."""
    lost_reports = len(missing) + len(unresolved)
    unexpected = len(record.unexpected)
    print()
    for problem in problems:
        print(f"faults: problem: {problem}")
    print(f"faults: {time.time() - started_at:.0f} s in all")
    out_of_order = sum(max(row["accounts_out_of_order"], row["accounts_sent_early"]) for row in events["receivers"].values())
    print(f"faults: reports accepted={len(record.accepted)} lost={lost_reports} · events={events['events']} "
          f"lost={len(events['lost_events'])} out_of_order={out_of_order} · drift={drift} · unexpected_5xx={unexpected} · crashes={len(crashes)}")
    ok = lost_reports == 0 and not events["lost_events"] and drift == 0 and unexpected == 0 and not crashes and not problems
    return 0 if ok else 1
