\set VERBOSITY terse
SET citus.log_remote_commands = on;
SET client_min_messages = log;
\echo == router CTE with pg_notify, co-located queue (acct-104 on 55432)
WITH q AS (INSERT INTO work_q (account_id) VALUES ('acct-104') RETURNING 1)
SELECT pg_notify('ch', 'router-cte') FROM q;
\echo == router select with pg_notify and WHERE account_id = const
SELECT pg_notify('ch', 'router-select') FROM account_states WHERE account_id = 'acct-104';
INSERT INTO account_states (account_id, tier, state) VALUES ('acct-104','free','{}') ON CONFLICT DO NOTHING;
SELECT pg_notify('ch', 'router-select2') FROM account_states WHERE account_id = 'acct-104';
\echo == plain pg_notify
SELECT pg_notify('ch', 'plain');
