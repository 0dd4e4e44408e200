\set VERBOSITY terse
SET citus.log_remote_commands = on;
SET client_min_messages = log;
\echo ===== (a) sync shape with local account_work
BEGIN;
WITH device AS (
  INSERT INTO devices (account_id, device_id, first_seen_at, last_seen_at) VALUES ('acct-104','d1',now(),now())
  ON CONFLICT (account_id, device_id) DO UPDATE SET last_seen_at = GREATEST(devices.last_seen_at, EXCLUDED.last_seen_at) RETURNING 1
), inserted AS (
  INSERT INTO reports (account_id, report_id, device_id, observed_at, product_id, original_transaction_id, transaction_id, purchased_at)
  SELECT 'acct-104', * FROM unnest(array['r1'], array['d1'], array[now()], array['p'], array['o1'], array['t1'], array[now()])
  ON CONFLICT DO NOTHING RETURNING report_id
), queued AS (
  INSERT INTO account_work (account_id) SELECT 'acct-104' FROM (SELECT 1 FROM inserted LIMIT 1) x RETURNING 1
), notified AS (SELECT pg_notify('subsync_reports','acct-104')::text FROM (SELECT 1 FROM inserted LIMIT 1) x)
SELECT report_id, (SELECT count(*) FROM notified), (SELECT count(*) FROM device) FROM inserted;
COMMIT;
