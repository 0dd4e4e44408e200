\set VERBOSITY terse
INSERT INTO transaction_owners (original_transaction_id, account_id) SELECT 'o'||i, 'acct-104' FROM generate_series(1,6) i ON CONFLICT DO NOTHING;
SELECT 'o'||i AS o, (SELECT nodeport FROM pg_dist_shard_placement p WHERE p.shardid = get_shard_id_for_distribution_column('transaction_owners','o'||i)) FROM generate_series(1,6) i;
SET citus.log_remote_commands = on; SET client_min_messages = log;
\echo == FOR SHARE on owner row (other node) + write on account node
BEGIN;
SELECT account_id FROM transaction_owners WHERE original_transaction_id = 'o1' FOR SHARE;
SELECT account_id FROM transaction_owners WHERE original_transaction_id = 'o2' FOR SHARE;
INSERT INTO work_b (bucket, account_id) VALUES ('w1', 'acct-104');
COMMIT;
