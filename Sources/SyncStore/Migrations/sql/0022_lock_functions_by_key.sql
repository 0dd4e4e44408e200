-- The lock functions of sql/0014 find each row by its key, and must never scan a table for it
-- (issue #15): `subsync_lock_accounts` (the workers' batches), `subsync_lock_transaction_owners`
-- and `subsync_lock_app_account_tokens` (the binding of signed purchases to accounts).
--
-- PL/pgSQL caches the plan of each statement of a function for the life of the connection: after
-- five calls a generic plan, costed on the table as it was then. A worker that starts on a new
-- database (an empty `account_states`, where a sequential scan looks cheapest) went on scanning
-- the whole table once per account while it grew to thousands of rows, until autovacuum's next
-- analyze: on a backlog of 200,000 reports for 40,000 new accounts that statement took 60 % of
-- the workers' time (perf on PostgreSQL: heap visibility checks and text comparisons) and the
-- drain ran at half the speed it has with the key (docs/PERFORMANCE.md item 14). With
-- sequential scans off inside these functions the cached plan is the key's, whatever the
-- table's size when it was made.
--
-- One DO block: each EXECUTE is a statement of its own for Citus (README, "Migrations").
DO $$
BEGIN
    EXECUTE 'ALTER FUNCTION subsync_lock_accounts(text[], boolean, text, jsonb) SET enable_seqscan = off';
    EXECUTE 'ALTER FUNCTION subsync_lock_transaction_owners(text[]) SET enable_seqscan = off';
    EXECUTE 'ALTER FUNCTION subsync_lock_app_account_tokens(uuid[]) SET enable_seqscan = off';
END
$$;
