# shellcheck shell=bash
# Sourced by the benchmarks. wait_until_none URL TABLE CONDITION returns once no row of TABLE
# matches CONDITION (it fails after BENCH_WAIT_SECONDS, default 600, if rows are still there).
#
# The wait is one connection running one server-side loop that looks every 10 ms. Polling with
# a psql started every 50-100 ms (a process, a connection, a backend each time) took about a
# sixth of this 2-core machine's CPU from the service being measured, and ended the clock up to
# 100 ms late: the resolution drain measured 26k reports/s that way, 35k/s with this.
wait_until_none() {
  psql "$1" -qtAX -v ON_ERROR_STOP=1 -c "DO \$wait\$
    DECLARE deadline timestamptz := clock_timestamp() + interval '${BENCH_WAIT_SECONDS:-600} seconds';
    BEGIN
      WHILE EXISTS (SELECT 1 FROM $2 WHERE $3) LOOP
        IF clock_timestamp() > deadline THEN
          RAISE EXCEPTION 'rows of % still match % after ${BENCH_WAIT_SECONDS:-600} s', '$2', \$c\$$3\$c\$;
        END IF;
        PERFORM pg_sleep(0.01);
      END LOOP;
    END \$wait\$" >/dev/null
}
