\set VERBOSITY terse
SET citus.multi_task_query_log_level = error;
-- anchors: one text key per shard index of the co-location group
CREATE TEMP TABLE anchors AS
SELECT DISTINCT ON (shard) shard, k AS anchor FROM (
  SELECT get_shard_id_for_distribution_column('account_states', 'w' || i) AS shard, 'w' || i AS k, i FROM generate_series(0, 2000) i) x
ORDER BY shard, i;
SELECT count(*) AS shards_with_anchor, max(anchor) FROM anchors;
SELECT anchor FROM anchors WHERE shard = 102008 \gset
\echo anchor for shard 102008 = :anchor
INSERT INTO work_b (bucket, account_id) VALUES (:'anchor','acct-104'),(:'anchor','acct-109'),(:'anchor','acct-117');
SET citus.log_remote_commands = on; SET client_min_messages = log;
BEGIN;
PREPARE claim(text, int) AS
WITH taken AS (
  DELETE FROM work_b WHERE bucket = $1 AND id = ANY(ARRAY(
     SELECT id FROM work_b WHERE bucket = $1 ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED))
  RETURNING account_id)
SELECT DISTINCT account_id FROM taken;
EXECUTE claim(:'anchor', 2);
-- same transaction: router reads/writes of the claimed accounts, same shard index
UPDATE reports SET status='resolved' WHERE status='pending' AND account_id = ANY(array['acct-104','acct-109']) RETURNING account_id, report_id;
COMMIT;
