"""CPU seconds each PostgreSQL cluster has used so far, from /proc (a benchmark's helper).

Usage: node_cpu.py DATA_DIR... ; prints one JSON object {data dir's name: seconds}.
A cluster's CPU is its postmaster's own time, the time of the children it has already waited
for (backends that ended: cutime + cstime) and the time of the children still running; sampled
before and after a phase, the difference is what the phase cost that node.
"""
import json
import os
import sys

TICKS = os.sysconf("SC_CLK_TCK")


def stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    # The command name is in parentheses and may hold spaces: the fields start after it.
    fields = text[text.rindex(")") + 2:].split()
    ppid = int(fields[1])
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return ppid, utime, stime, cutime, cstime


def cluster_seconds(data_dir):
    with open(os.path.join(data_dir, "postmaster.pid")) as f:
        postmaster = int(f.readline())
    _, utime, stime, cutime, cstime = stat(postmaster)
    total = utime + stime + cutime + cstime
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ppid, child_utime, child_stime, _, _ = stat(int(entry))
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
        if ppid == postmaster:
            total += child_utime + child_stime
    return total / TICKS


print(json.dumps({os.path.basename(d.rstrip("/")): round(cluster_seconds(d), 3) for d in sys.argv[1:]}))
