\set VERBOSITY terse
SET citus.log_remote_commands = on; SET client_min_messages = log;
\echo == writeStates shape: UPDATE .. FROM unnest (accounts of one shard)
PREPARE ws(text[], text[]) AS UPDATE account_states AS s SET tier = v.tier FROM unnest($1::text[], $2::text[]) AS v(account_id, tier) WHERE s.account_id = v.account_id;
EXPLAIN (COSTS OFF) EXECUTE ws(array['acct-104','acct-109'], array['free','free']);
\echo == same + explicit AND s.account_id = ANY($1)
PREPARE ws2(text[], text[]) AS UPDATE account_states AS s SET tier = v.tier FROM unnest($1::text[], $2::text[]) AS v(account_id, tier) WHERE s.account_id = v.account_id AND s.account_id = ANY($1::text[]);
EXPLAIN (COSTS OFF) EXECUTE ws2(array['acct-104','acct-109'], array['free','free']);
\echo == entitlements DELETE shape
PREPARE de(text[], text[], text[]) AS DELETE FROM entitlements AS e WHERE e.account_id = ANY($1::text[]) AND NOT EXISTS (SELECT 1 FROM unnest($2::text[], $3::text[]) AS k(a, id) WHERE k.a = e.account_id AND k.id = e.entitlement_id);
EXPLAIN (COSTS OFF) EXECUTE de(array['acct-104','acct-109'], array['acct-104'], array['x']);
\echo == reference table update matching no row
BEGIN;
UPDATE webhook_endpoints SET failing_since = NULL WHERE endpoint_id = ANY(array[gen_random_uuid()]) AND failing_since IS NOT NULL;
COMMIT;
