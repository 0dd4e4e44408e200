-- A worker's batch within one shard on Citus (docs/CITUS.md, "Scale-out: the plan", step 1a).
--
-- Each claim queue entry (sql/0014) carries its account's bucket: `subsync_work_bucket(account_id)`,
-- which is '' on one PostgreSQL (one queue, as before) and, once `subsync distribute` has written
-- it on a Citus cluster, the anchor value of the shard that holds the account. A claim takes the
-- oldest unlocked entry's bucket, then entries of that bucket only, so every account of a batch is
-- in one shard: its locks are a few statements (`subsync_lock_account_states_by_bucket`, below) and
-- its writes run on one shard. Citus lets one statement that writes several shards hold each of
-- them at a time, so batches spanning every shard ran one after another.
--
-- An entry whose bucket is stale (queued before `distribute`, or by an older binary: '') is still
-- claimed and resolved; its batch may then span shards, which the lock function handles (more
-- slowly: a statement per shard).
--
-- One DO block, each statement EXECUTEd on its own (Citus, sql/0019); running it again changes
-- nothing, and leaves the bucket function `distribute` wrote in place.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE account_work ADD COLUMN IF NOT EXISTS bucket text NOT NULL DEFAULT ''''';
    EXECUTE 'CREATE INDEX IF NOT EXISTS account_work_by_bucket ON account_work (bucket, id)';
    IF to_regprocedure('subsync_work_bucket(text)') IS NULL THEN
        EXECUTE 'CREATE FUNCTION subsync_work_bucket(account text) RETURNS text
                 IMMUTABLE PARALLEL SAFE LANGUAGE sql AS $body$ SELECT ''''::text $body$';
    END IF;
END
$$;

-- What `subsync_lock_account_states_skipping` (sql/0033) returns, for a Citus cluster: the accounts
-- are taken a shard at a time, and each shard's in statements over its accounts, which Citus
-- routes to that shard (a `FOR UPDATE` across shards it refuses). The shards are Citus's own
-- answer (`get_shard_id_for_distribution_column`), not the buckets, so that a bucket function
-- gone stale (a shard split before `distribute` ran again, or a cluster migrated and not yet
-- distributed again) makes batches slower, never refused. A worker's batch is one bucket, so
-- one shard: three statements in all, where `subsync_lock_account_states_to_resolve` (sql/0025)
-- runs three or four per account. Without Citus the accounts are grouped by their bucket (one
-- group on one PostgreSQL), which is what lets a test try several groups there.
--   * every existing row no other transaction holds, locked;
--   * every account without a row that no other transaction is creating (its advisory lock,
--     sql/0023, is free): reserved under that lock, with a NULL state, 0 and -infinity;
--   * nothing for the rest, which the caller queues again.
-- Only the lock of a row that appeared between the look and the reservation is waited for, as
-- in sql/0033; a deadlock that wait could close with another locker is detected by the server
-- and the batch retried (a deadlock is a transient error to the worker).
CREATE OR REPLACE FUNCTION subsync_lock_account_states_by_bucket(account_ids text[])
RETURNS TABLE (account_id text, state json, last_sequence bigint, resolved_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    groups refcursor;
    accounts text[];
    existing text[];
    reserved text[];
    appeared text[];
    found_row record;
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        OPEN groups FOR EXECUTE
            'SELECT array_agg(a ORDER BY a) FROM unnest($1) AS a
             GROUP BY get_shard_id_for_distribution_column(''account_states'', a)
             ORDER BY min(a)' USING account_ids;
    ELSE
        OPEN groups FOR
            SELECT array_agg(a ORDER BY a) FROM unnest(account_ids) AS a
            GROUP BY subsync_work_bucket(a) ORDER BY min(a);
    END IF;
    LOOP
        FETCH groups INTO accounts;
        EXIT WHEN NOT FOUND;
        RETURN QUERY SELECT s.account_id, s.state, s.last_sequence, s.resolved_at
            FROM account_states s WHERE s.account_id = ANY(accounts)
            FOR UPDATE SKIP LOCKED;
        SELECT array_agg(s.account_id) INTO existing FROM account_states s WHERE s.account_id = ANY(accounts);
        SELECT array_agg(m.id ORDER BY m.id) INTO reserved
        FROM (SELECT unnest(accounts) EXCEPT SELECT unnest(existing)) AS m(id)
        WHERE pg_try_advisory_xact_lock(2, hashtext(m.id));
        CONTINUE WHEN reserved IS NULL;
        appeared := '{}';
        FOR found_row IN
            SELECT s.account_id AS a, s.state AS st, s.last_sequence AS q, s.resolved_at AS r
            FROM account_states s WHERE s.account_id = ANY(reserved) FOR UPDATE
        LOOP
            appeared := appeared || found_row.a;
            account_id := found_row.a;
            state := found_row.st;
            last_sequence := found_row.q;
            resolved_at := found_row.r;
            RETURN NEXT;
        END LOOP;
        RETURN QUERY SELECT r.id, NULL::json, 0::bigint, '-infinity'::timestamptz
            FROM unnest(reserved) AS r(id) WHERE NOT (r.id = ANY(appeared));
    END LOOP;
    CLOSE groups;
END
$$;
