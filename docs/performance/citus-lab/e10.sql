\set VERBOSITY terse
DO $do$
DECLARE anchors text;
BEGIN
  SELECT string_agg(quote_literal(anchor), ',' ORDER BY shard) INTO anchors FROM (
    SELECT DISTINCT ON (shard) shard, 'w'||i AS anchor FROM (
      SELECT get_shard_id_for_distribution_column('account_states', 'w' || i) AS shard, i FROM generate_series(0, 5000) i) x ORDER BY shard, i) y;
  EXECUTE format($f$CREATE OR REPLACE FUNCTION subsync_work_bucket(account text) RETURNS text IMMUTABLE PARALLEL SAFE LANGUAGE sql
    AS 'SELECT (ARRAY[%s])[1 + ((hashtext(account)::bigint + 2147483648) * 32 / 4294967296)::int]'$f$, replace(anchors, '''', ''''''));
END $do$;
SELECT a, subsync_work_bucket(a), get_shard_id_for_distribution_column('account_states', a) = get_shard_id_for_distribution_column('account_states', subsync_work_bucket(a)) AS same_shard
FROM unnest(array['acct-104','acct-107','acct-150','x','zz-99']) a;
SELECT bool_and(get_shard_id_for_distribution_column('account_states', 'k'||i) = get_shard_id_for_distribution_column('account_states', subsync_work_bucket('k'||i))) AS all_same FROM generate_series(1,5000) i;
SET citus.log_remote_commands = on; SET client_min_messages = log; SET citus.multi_task_query_log_level = error;
PREPARE ins(text) AS INSERT INTO work_b (bucket, account_id) VALUES (subsync_work_bucket($1), $1);
EXECUTE ins('acct-150');EXECUTE ins('acct-150');EXECUTE ins('acct-150');EXECUTE ins('acct-150');EXECUTE ins('acct-150');EXECUTE ins('acct-107');EXECUTE ins('acct-107');
\echo == sync shape, all router, co-located queue by bucket
PREPARE sync(text, text[]) AS
WITH inserted AS (
  INSERT INTO reports (account_id, report_id, device_id, observed_at, product_id, original_transaction_id, transaction_id, purchased_at)
  SELECT $1, r, 'd1', now(), 'p', 'o', 't', now() FROM unnest($2) r ON CONFLICT DO NOTHING RETURNING report_id
), queued AS (
  INSERT INTO work_b (bucket, account_id) SELECT subsync_work_bucket($1), $1 FROM (SELECT 1 FROM inserted LIMIT 1) x RETURNING 1)
SELECT report_id FROM inserted;
EXECUTE sync('acct-150', array['s1','s2']);
