\set VERBOSITY terse
SET citus.log_remote_commands = on;
SET client_min_messages = log;
\echo ===== (b) sync shape, reports via INSERT..SELECT unnest, co-located queue via INSERT .. SELECT
BEGIN;
WITH inserted AS (
  INSERT INTO reports (account_id, report_id, device_id, observed_at, product_id, original_transaction_id, transaction_id, purchased_at)
  SELECT 'acct-104', * FROM unnest(array['r2'], array['d1'], array[now()], array['p'], array['o1'], array['t1'], array[now()])
  ON CONFLICT DO NOTHING RETURNING report_id
), queued AS (
  INSERT INTO work_q (account_id) SELECT 'acct-104' FROM (SELECT 1 FROM inserted LIMIT 1) x RETURNING 1
)
SELECT report_id FROM inserted;
COMMIT;
\echo ===== (c) multi-row VALUES, two accounts same shard (acct-104, acct-109), + queue VALUES
BEGIN;
INSERT INTO reports (account_id, report_id, device_id, observed_at, product_id, original_transaction_id, transaction_id, purchased_at)
VALUES ('acct-104','r3','d1',now(),'p','o1','t1',now()), ('acct-109','r3','d1',now(),'p','o1','t1',now()) ON CONFLICT DO NOTHING RETURNING report_id;
INSERT INTO work_q (account_id) VALUES ('acct-104'),('acct-109');
COMMIT;
\echo ===== (d) multi-row VALUES, two shards same node (acct-104 102008, acct-150 102010)
BEGIN;
INSERT INTO reports (account_id, report_id, device_id, observed_at, product_id, original_transaction_id, transaction_id, purchased_at)
VALUES ('acct-104','r4','d1',now(),'p','o1','t1',now()), ('acct-150','r4','d1',now(),'p','o1','t1',now()) ON CONFLICT DO NOTHING;
COMMIT;
\echo ===== (e) two single-shard statements, two shards same node, one tx
BEGIN;
INSERT INTO reports (account_id, report_id, device_id, observed_at, product_id, original_transaction_id, transaction_id, purchased_at)
VALUES ('acct-104','r5','d1',now(),'p','o1','t1',now());
INSERT INTO reports (account_id, report_id, device_id, observed_at, product_id, original_transaction_id, transaction_id, purchased_at)
VALUES ('acct-150','r5','d1',now(),'p','o1','t1',now());
COMMIT;
\echo ===== (f) two single-shard statements, two nodes
BEGIN;
INSERT INTO reports (account_id, report_id, device_id, observed_at, product_id, original_transaction_id, transaction_id, purchased_at)
VALUES ('acct-104','r6','d1',now(),'p','o1','t1',now());
INSERT INTO reports (account_id, report_id, device_id, observed_at, product_id, original_transaction_id, transaction_id, purchased_at)
VALUES ('acct-107','r6','d1',now(),'p','o1','t1',now());
COMMIT;
\echo ===== (g) UPDATE ... = ANY(array of one shard) + local-table write
BEGIN;
UPDATE reports SET attempts = attempts WHERE account_id = ANY(array['acct-104','acct-109']);
INSERT INTO account_work (account_id) VALUES ('acct-104');
COMMIT;
\echo ===== (h) reference table write
BEGIN;
INSERT INTO webhook_endpoints (endpoint_id, url, secret) VALUES (gen_random_uuid(), 'http://x', 's');
COMMIT;
