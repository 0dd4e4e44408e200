# shellcheck shell=bash
# Sourced by the benchmarks. wait_until_none URL TABLE CONDITION [PID] returns once no row of
# TABLE matches CONDITION. It fails if PID (the service being measured) exits first, or after
# BENCH_WAIT_SECONDS (default 600).
#
# Each look is a server-side loop on one connection that checks every 10 ms for up to two
# seconds, committing between checks (a DO block's open snapshot would otherwise hold back the
# pruning of the rows the service updates, for the whole drain). Polling with a psql started
# every 50-100 ms (a process, a connection and a backend each time) took about an eighth of this
# 2-core machine's CPU from the service measured and ended the clock up to 100 ms late: the
# resolution drain measured 26k reports/s that way and 33-34k/s with this
# (docs/performance/JOURNAL.md item 15).
#
# Sequential scans are off for the look: the tables are analyzed while the backlog is all
# pending, so the planner answered EXISTS with a sequential scan, which reads every row the
# service has finished (they sit in front of the pending ones) every 10 ms. During a webhook
# drain that loop was 16 % of PostgreSQL's CPU, about 8 % of the machine (perf;
# docs/performance/JOURNAL.md item 27). Through the partial index of pending rows each look is
# a few index entries.
wait_until_none() {
  local url=$1 table=$2 condition=$3 pid=${4:-} deadline=$((SECONDS + ${BENCH_WAIT_SECONDS:-600})) left
  while :; do
    left=$(psql "$url" -qtAX -v ON_ERROR_STOP=1 -c "SET enable_seqscan = off" \
      -c "DO \$wait\$
          DECLARE until_at timestamptz := clock_timestamp() + interval '2 seconds';
          BEGIN
            WHILE EXISTS (SELECT 1 FROM $table WHERE $condition) AND clock_timestamp() < until_at LOOP
              COMMIT;
              PERFORM pg_sleep(0.01);
            END LOOP;
          END \$wait\$" \
      -c "SELECT EXISTS (SELECT 1 FROM $table WHERE $condition)")
    [ "$left" = f ] && return 0
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      echo "the service (pid $pid) exited while rows of $table still matched: $condition" >&2
      return 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "rows of $table still match after ${BENCH_WAIT_SECONDS:-600} s: $condition" >&2
      return 1
    fi
  done
}
