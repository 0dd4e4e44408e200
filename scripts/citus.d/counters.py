"""What scripts/citus's checks read from every node of the cluster (the coordinator first):
prepared transactions recorded (pg_dist_transaction, with the cluster's 2PC recovery off so that
none is removed) and single- and multi-shard statements planned (citus_stat_counters, on for
every node)."""
import subprocess


def psql(url, sql):
    return subprocess.run(["psql", url, "-qtAX", "-c", sql], capture_output=True, text=True, check=True).stdout.strip()


def prepared(nodes):
    return [int(psql(url, "SELECT count(*) FROM pg_dist_transaction")) for url in nodes]


def single_shard(nodes):
    """Single-shard statements each node has planned."""
    return [int(psql(url, "SELECT coalesce(sum(query_execution_single_shard), 0) FROM citus_stat_counters")) for url in nodes]


def multi_shard(nodes):
    """Statements on several shards each node has planned (reads, updates and inserts)."""
    return [int(psql(url, "SELECT coalesce(sum(query_execution_multi_shard), 0) FROM citus_stat_counters")) for url in nodes]


def recover(nodes):
    """Recovers the records of earlier distributed transactions now, so that none is removed during a count."""
    for url in nodes:
        psql(url, "SELECT recover_prepared_transactions()")
