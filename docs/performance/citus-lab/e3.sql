\set VERBOSITY terse
PREPARE q(text[]) AS SELECT account_id, aggregate FROM transactions WHERE account_id = ANY($1);
EXPLAIN (COSTS OFF) EXECUTE q(array['acct-104','acct-109']);
EXECUTE q(array['acct-104','acct-109']);EXECUTE q(array['acct-104','acct-109']);EXECUTE q(array['acct-104','acct-109']);EXECUTE q(array['acct-104','acct-109']);EXECUTE q(array['acct-104','acct-109']);EXECUTE q(array['acct-104','acct-109']);
EXPLAIN (COSTS OFF) EXECUTE q(array['acct-104','acct-109']);
SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name='q';
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE q(array['acct-104','acct-109']);
RESET plan_cache_mode;
-- fast path eq
PREPARE q2(text) AS SELECT account_id FROM transactions WHERE account_id = $1;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE q2('acct-104');
-- opaque form used on plain PG
PREPARE q3(text[]) AS SELECT account_id FROM transactions WHERE account_id = ANY((SELECT $1::text[])::text[]);
RESET plan_cache_mode;
EXPLAIN (COSTS OFF) EXECUTE q3(array['acct-104','acct-109']);
