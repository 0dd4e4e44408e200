\set VERBOSITY terse
SET citus.log_remote_commands = on;
SET client_min_messages = log;
\echo ===== on worker 55432: INSERT..SELECT unnest for accounts of local shard 102008
BEGIN;
INSERT INTO transactions (account_id, transaction_id, original_transaction_id, product_id, report_count, aggregate, updated_at)
SELECT a, t, t, 'p', 1, '{}'::json, now() FROM unnest(array['acct-104','acct-109'], array['tx1','tx1']) v(a,t)
ON CONFLICT (account_id, transaction_id) DO UPDATE SET report_count = transactions.report_count + EXCLUDED.report_count;
COMMIT;
\echo ===== on worker 55432: same for shard on the other worker (acct-107, 102009 on 55433)
BEGIN;
INSERT INTO transactions (account_id, transaction_id, original_transaction_id, product_id, report_count, aggregate, updated_at)
SELECT a, t, t, 'p', 1, '{}'::json, now() FROM unnest(array['acct-107','acct-136'], array['tx1','tx1']) v(a,t)
ON CONFLICT (account_id, transaction_id) DO UPDATE SET report_count = transactions.report_count + EXCLUDED.report_count;
COMMIT;
\echo ===== on worker 55432: router statements for local shard, multi-row VALUES + UPDATE ANY + queue
BEGIN;
INSERT INTO transactions (account_id, transaction_id, original_transaction_id, product_id, report_count, aggregate, updated_at)
VALUES ('acct-104','tx2','tx2','p',1,'{}',now()),('acct-109','tx2','tx2','p',1,'{}',now())
ON CONFLICT (account_id, transaction_id) DO UPDATE SET report_count = transactions.report_count + EXCLUDED.report_count;
UPDATE account_states SET tier = tier WHERE account_id = ANY(array['acct-104','acct-109']);
INSERT INTO work_q (account_id) VALUES ('acct-104');
COMMIT;
\echo ===== on worker 55432: router statement for remote shard only (acct-107)
BEGIN;
INSERT INTO work_q (account_id) VALUES ('acct-107');
COMMIT;
SELECT count(*) AS prepared_now FROM pg_prepared_xacts;
