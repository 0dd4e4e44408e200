-- The index of due deliveries is only for the statements that read deliveries in due order
-- (docs/PERFORMANCE.md item 28).
--
-- `deliveries_due` (next_attempt_at) WHERE status = 'pending' (sql/0001) matched every statement
-- that names pending deliveries, as `deliveries_pending_by_stream` (sql/0005) does. The probes of
-- one stream's pending deliveries (the claim's, the record's hold and release) are meant to go
-- through the stream index, a few entries per stream; but with statistics taken while few
-- deliveries were pending (a steady state analyzed, then a burst: a replay to a new endpoint, a
-- busy hour), the planner took the due index for a small one and read all of it for every
-- stream probed: recording 200 attempts read 600,000 index entries with 3,000 deliveries
-- pending. Its replacement also requires `next_attempt_at IS NOT NULL` (always true: the column
-- is NOT NULL), which every statement that wants the due order implies with its
-- `next_attempt_at <= $now`, and which the claim's and the record's probes of a stream do not.
-- (The periodic hold's probes of a stream, `holdBlocked`, compare next_attempt_at too, and can
-- still take it.)
--
-- Building it reads the whole table while writes wait (it holds a SHARE lock): on a large table
-- create it beforehand with CREATE INDEX CONCURRENTLY (same name, same definition), and this
-- migration only drops the old one. One DO block, each EXECUTE a statement of its own, for
-- Citus, which propagates both to every shard (README, "Migrations").
DO $$
BEGIN
    EXECUTE 'CREATE INDEX IF NOT EXISTS deliveries_due_by_time ON deliveries (next_attempt_at) WHERE status = ''pending'' AND next_attempt_at IS NOT NULL';
    EXECUTE 'DROP INDEX IF EXISTS deliveries_due';
END
$$;
