"""The throwaway database: a PostgreSQL cluster, or a Citus coordinator and two workers, and psql."""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

from common import ROOT, Failure, free_port, registry


class Postgres:
    def __init__(self, workdir):
        bins = sorted((d for d in os.listdir("/usr/lib/postgresql")), key=lambda v: [int(x) for x in re.findall(r"\d+", v)])
        self.bindir = f"/usr/lib/postgresql/{bins[-1]}/bin"
        self.dir = tempfile.mkdtemp(prefix="subsync-faults-pg.")
        self.data = os.path.join(self.dir, "data")
        self.port = free_port()
        self.as_pg = []
        if os.getuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            self.as_pg = ["runuser", "-u", "postgres", "--"]
        self.url = f"postgresql://subsync@127.0.0.1:{self.port}/subsync"
        registry.cleanups.append(self.destroy)
        self.log = os.path.join(workdir, "postgres.log")

    def run(self, *args, check=True):
        result = subprocess.run(self.as_pg + list(args), capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            raise Failure(f"{' '.join(args[:2])} failed: {result.stdout}{result.stderr}")
        return result

    def init(self):
        self.run(f"{self.bindir}/initdb", "-D", self.data, "-U", "subsync", "--auth=trust", "-E", "UTF8",
                 "--locale=C.UTF-8", "--lc-collate=C", "--no-sync")
        self.start()
        subprocess.run([f"{self.bindir}/createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "subsync", "subsync"],
                       check=True, timeout=60)

    def start(self):
        self.run(f"{self.bindir}/pg_ctl", "-D", self.data, "-l", os.path.join(self.dir, "server.log"), "-w", "-t", "60",
                 "-o", self.server_options(self.port), "start")

    def server_options(self, port, extra="", synchronous_commit="off"):
        # fsync off: the faults kill processes, never the machine, so what a commit wrote to the
        # kernel survives them. synchronous_commit off only where no process is killed: a commit
        # it answers before writing its WAL is lost with the node's shared memory.
        return (f"-c listen_addresses=127.0.0.1 -p {port} -k {self.dir} -c max_connections=300 {extra}"
                f"-c fsync=off -c synchronous_commit={synchronous_commit} -c full_page_writes=off")

    def stop(self, mode="fast"):
        self.run(f"{self.bindir}/pg_ctl", "-D", self.data, "-m", mode, "-w", "-t", "60", "stop")

    def alive(self):
        return self.run(f"{self.bindir}/pg_ctl", "-D", self.data, "status", check=False).returncode == 0

    def destroy(self):
        if os.path.exists(self.data):
            self.run(f"{self.bindir}/pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop", check=False)
        server_log = os.path.join(self.dir, "server.log")
        if os.path.exists(server_log):
            shutil.copy(server_log, self.log)
        shutil.rmtree(self.dir, ignore_errors=True)


class CitusCluster(Postgres):
    """A Citus coordinator and two workers (issue #18, scripts/citus), in the Postgres shape: `url`
    is the coordinator's; `stop` and `start` are the worker node fault (worker1's PostgreSQL killed
    and started again), so the same schedule exercises a node that goes away under load."""

    def __init__(self, workdir):
        super().__init__(workdir)
        self.nodes = {name: (os.path.join(self.dir, name), free_port() if name != "coordinator" else self.port)
                      for name in ("coordinator", "worker1", "worker2")}
        self.data = self.nodes["coordinator"][0]

    def init(self):
        subprocess.run([os.path.join(ROOT, "scripts/citus-install")], check=True, timeout=900)
        for name, (data, port) in self.nodes.items():
            self.run(f"{self.bindir}/initdb", "-D", data, "-U", "subsync", "--auth=trust", "-E", "UTF8",
                     "--locale=C.UTF-8", "--lc-collate=C", "--no-sync")
            self.start_node(name)
            subprocess.run([f"{self.bindir}/createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "subsync", "subsync"],
                           check=True, timeout=60)
            psql(f"postgresql://subsync@127.0.0.1:{port}/subsync", "CREATE EXTENSION citus")
        psql(self.url, f"SELECT citus_set_coordinator_host('127.0.0.1', {self.port})")
        for name in ("worker1", "worker2"):
            psql(self.url, f"SELECT citus_add_node('127.0.0.1', {self.nodes[name][1]})")

    def start_node(self, name):
        data, port = self.nodes[name]
        # A worker node is SIGKILLed under load (stop, below): its commits must be written before
        # they are answered, as with PostgreSQL's default, or a sync answered 202 loses its reports.
        options = self.server_options(port, "-c shared_preload_libraries=citus -c citus.recover_2pc_interval=2s ",
                                      synchronous_commit="on")
        self.run(f"{self.bindir}/pg_ctl", "-D", data, "-l", os.path.join(self.dir, f"{name}.log"), "-w", "-t", "60",
                 "-o", options, "start")

    def start(self):
        self.start_node("worker1")

    def stop(self, mode="fast"):
        # A kill, not a shutdown: whatever the coordinator had in flight there is cut off. The
        # postmaster and its children get SIGKILL (pg_ctl -m immediate was seen waiting a minute
        # on a loaded machine); the next start recovers from the crash.
        data = self.nodes["worker1"][0]
        with open(os.path.join(data, "postmaster.pid")) as pid_file:
            postmaster = int(pid_file.readline())
        # Stopped first, so that it forks no backend between the listing of its children and the
        # kill: one forked then survived the kill, held the node's shared memory, and the
        # restart failed (seen once, 2026-11-29, with the batches' connections to the nodes).
        os.kill(postmaster, signal.SIGSTOP)
        children = subprocess.run(["pgrep", "-P", str(postmaster)], capture_output=True, text=True).stdout.split()
        for pid in [postmaster] + [int(child) for child in children]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.time() + 30
        while time.time() < deadline and any(os.path.exists(f"/proc/{pid}") for pid in [postmaster] + [int(child) for child in children]):
            time.sleep(0.1)

    def alive(self):
        return all(self.run(f"{self.bindir}/pg_ctl", "-D", data, "status", check=False).returncode == 0
                   for data, _ in self.nodes.values())

    def destroy(self):
        for name, (data, _) in self.nodes.items():
            if os.path.exists(data):
                self.run(f"{self.bindir}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop", check=False)
            log = os.path.join(self.dir, f"{name}.log")
            if os.path.exists(log):
                shutil.copy(log, self.log.replace("postgres.log", f"citus-{name}.log"))
        shutil.rmtree(self.dir, ignore_errors=True)


def psql(url, sql):
    result = subprocess.run(["psql", url, "-qtAX", "-F", "\x1f", "-v", "ON_ERROR_STOP=1", "-c", sql],
                            capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise Failure(f"psql failed: {result.stderr.strip()}")
    return [line.split("\x1f") for line in result.stdout.splitlines() if line]
