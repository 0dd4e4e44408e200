\set VERBOSITY terse
SET citus.log_remote_commands = on; SET client_min_messages = log;
BEGIN;
UPDATE webhook_endpoints SET failing_since = NULL WHERE endpoint_id = ANY(array['00000000-0000-0000-0000-000000000001'::uuid]) AND failing_since IS NOT NULL;
COMMIT;
\echo == record shape: UPDATE deliveries FROM unnest
PREPARE rd(text[], bigint[]) AS UPDATE deliveries d SET leased_until = NULL FROM unnest($1::text[], $2::bigint[]) AS v(account_id, delivery_id) WHERE d.account_id = v.account_id AND d.delivery_id = v.delivery_id;
BEGIN; EXECUTE rd(array['acct-104'], array[1::bigint]); COMMIT;
