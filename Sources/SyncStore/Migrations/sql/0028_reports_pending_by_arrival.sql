-- The index of pending reports in arrival order is only for the statements that ask for that
-- order (docs/PERFORMANCE.md item 28).
--
-- `reports_pending` (arrival) WHERE status = 'pending' (sql/0001) matched every statement that
-- names pending reports. A worker's claim (`status = 'pending' AND account_id = ANY($1)`) is
-- meant to go through `reports_pending_by_account` (sql/0002), a few entries per account; but
-- with statistics taken while few reports were pending (any database in its steady state,
-- analyzed, then a backlog: devices syncing through an outage of the workers, an import), the
-- planner took the arrival index for a small one and read all of it for every claim, filtering
-- by account: each batch read the whole backlog, and a drain of 120,000 reports ran at 14,700
-- reports/s instead of 36,500 (autovacuum analyzes again only after a tenth of the table has
-- changed). Its replacement has a predicate no claim implies (`arrival > 0`; arrival is an
-- identity from 1), so only the statements that write it use it: the sweeper's look at the
-- oldest pending reports and the resolution lag.
--
-- Building it reads the whole table while writes wait (it holds a SHARE lock): on a large table
-- create it beforehand with CREATE INDEX CONCURRENTLY (same name, same definition), and this
-- migration only drops the old one. One DO block, each EXECUTE a statement of its own, for
-- Citus, which propagates both to every shard (README, "Migrations").
DO $$
BEGIN
    EXECUTE 'CREATE INDEX IF NOT EXISTS reports_pending_by_arrival ON reports (arrival) WHERE status = ''pending'' AND arrival > 0';
    EXECUTE 'DROP INDEX IF EXISTS reports_pending';
END
$$;
