\set VERBOSITY terse
SET citus.multi_task_query_log_level = error;
SET citus.enable_stat_counters = on;
SELECT citus_stat_counters_reset();
\echo == multi-shard select (expect error)
SELECT count(*) FROM reports;
\echo == multi-row VALUES across shards/nodes
INSERT INTO work_q (account_id) VALUES ('acct-104'),('acct-107');
\echo == INSERT..SELECT unnest across nodes
INSERT INTO work_q (account_id) SELECT unnest(array['acct-104','acct-107']);
\echo == UPDATE ANY across shards
UPDATE work_q SET queued_at = queued_at WHERE account_id = ANY(array['acct-104','acct-107']);
\echo == ANY one shard
SELECT count(*) FROM work_q WHERE account_id = ANY(array['acct-104','acct-109']);
\echo == plpgsql function doing router statements (subsync_lock_account_states)
SELECT count(*) FROM subsync_lock_account_states(array['acct-104','acct-107'], true);
SELECT query_execution_single_shard, query_execution_multi_shard FROM citus_stat_counters WHERE name = current_database();
