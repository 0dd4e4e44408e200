\set VERBOSITY terse
SET citus.log_remote_commands = on; SET client_min_messages = log; SET citus.multi_task_query_log_level = error;
\echo == S1: modifying CTEs, VALUES inserts, queue conditional via INSERT..SELECT WHERE EXISTS
PREPARE s1(text, text, text) AS
WITH device AS (
  INSERT INTO devices (account_id, device_id, first_seen_at, last_seen_at) VALUES ($1,'d1',now(),now())
  ON CONFLICT (account_id, device_id) DO UPDATE SET last_seen_at = GREATEST(devices.last_seen_at, EXCLUDED.last_seen_at) RETURNING 1
), inserted AS (
  INSERT INTO reports (account_id, report_id, device_id, observed_at, product_id, original_transaction_id, transaction_id, purchased_at)
  VALUES ($1, $2, 'd1', now(), 'p', 'o', 't', now()), ($1, $3, 'd1', now(), 'p', 'o', 't', now())
  ON CONFLICT DO NOTHING RETURNING report_id
), queued AS (
  INSERT INTO work_b (bucket, account_id) SELECT subsync_work_bucket($1), $1 WHERE EXISTS (SELECT 1 FROM inserted) RETURNING 1
)
SELECT report_id, (SELECT count(*) FROM device), (SELECT count(*) FROM queued) FROM inserted;
BEGIN;
EXECUTE s1('acct-156', 'u1', 'u2');
COMMIT;
\echo == S2: same, queue unconditional VALUES
PREPARE s2(text, text, text) AS
WITH device AS (
  INSERT INTO devices (account_id, device_id, first_seen_at, last_seen_at) VALUES ($1,'d1',now(),now())
  ON CONFLICT (account_id, device_id) DO UPDATE SET last_seen_at = GREATEST(devices.last_seen_at, EXCLUDED.last_seen_at) RETURNING 1
), inserted AS (
  INSERT INTO reports (account_id, report_id, device_id, observed_at, product_id, original_transaction_id, transaction_id, purchased_at)
  VALUES ($1, $2, 'd1', now(), 'p', 'o', 't', now()), ($1, $3, 'd1', now(), 'p', 'o', 't', now())
  ON CONFLICT DO NOTHING RETURNING report_id
), queued AS (
  INSERT INTO work_b (bucket, account_id) VALUES (subsync_work_bucket($1), $1) RETURNING 1
)
SELECT report_id, (SELECT count(*) FROM device), (SELECT count(*) FROM queued) FROM inserted;
BEGIN;
EXECUTE s2('acct-156', 'u3', 'u4');
COMMIT;
