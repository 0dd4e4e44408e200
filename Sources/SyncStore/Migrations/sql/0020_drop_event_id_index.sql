-- Drops `events_by_id` (event_id), which no statement uses (issue #15).
--
-- Every statement that reads `events` names the account and the sequence (the delivery claim,
-- inspection, reconcile: the primary key) or a time range (the console's event log, replays:
-- `events_by_time`). A backend holding a `webhook-id` also holds the body, which names the account
-- and the sequence. The index cost an entry in a b-tree of random UUIDs for every event a worker
-- writes (two per new account), the largest statement of a worker's batch. Citus propagates the
-- drop to every shard.
DROP INDEX IF EXISTS events_by_id;
