\set VERBOSITY terse
SET citus.multi_task_query_log_level = error;
PREPARE snap(text, text[]) AS
SELECT s.state, s.last_sequence, s.resolved_at,
       (SELECT count(*) FROM reports r WHERE r.account_id = k.id AND r.status = 'pending'),
       (SELECT count(*) FROM reports r WHERE r.account_id = k.id AND r.status = 'pending' AND r.report_id = ANY($2::text[])),
       (SELECT COALESCE(json_agg(d.device_id), '[]') FROM devices d WHERE d.account_id = k.id)
FROM (SELECT $1::text AS id) AS k LEFT JOIN account_states s ON s.account_id = k.id;
EXPLAIN (COSTS OFF) EXECUTE snap('acct-104', array['r1']);
EXECUTE snap('acct-104', array['r1']);EXECUTE snap('acct-104', array['r1']);EXECUTE snap('acct-104', array['r1']);EXECUTE snap('acct-104', array['r1']);EXECUTE snap('acct-104', array['r1']);
SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name='snap';
