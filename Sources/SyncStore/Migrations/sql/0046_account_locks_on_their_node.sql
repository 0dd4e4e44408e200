-- An account's advisory lock taken on the node that holds the account (docs/CITUS.md,
-- "Scale-out: the plan", step 3).
--
-- Whoever creates an account's `account_states` row first takes a transaction-scoped advisory
-- lock on the account (sql/0023, 0025): the workers' batches, usage writes, bindings, operator
-- commands. Advisory locks are per node, so every creator must take it on the same node. Until
-- now all of them ran on the coordinator and took it there. For a transaction begun on the
-- account's worker node (a usage write sent there) to exclude one begun on the coordinator, the
-- lock is taken, on Citus, by a statement Citus routes to the account's shard: a `SELECT` over
-- `work_anchors`, a table of one row per claim queue bucket (one per shard, sql/0043), which
-- `subsync distribute` distributes with the accounts and fills. Citus sends the statement whole
-- to the shard's node and the lock is held there until the transaction ends, wherever it began.
-- A bucket without its anchor row (before `distribute` has written them) takes the lock on the
-- node the function runs on, as before: every creator calls the same function and decides the
-- same way. One PostgreSQL keeps the local lock and the row `''`.
DO $$
BEGIN
    EXECUTE 'CREATE TABLE IF NOT EXISTS work_anchors (bucket text PRIMARY KEY)';
    EXECUTE 'INSERT INTO work_anchors (bucket) VALUES ('''') ON CONFLICT DO NOTHING';
END
$$;

-- The accounts of `ids` whose advisory lock this transaction got without waiting.
CREATE OR REPLACE FUNCTION subsync_try_account_locks(ids text[])
RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    bucket_value text;
    group_ids text[];
    got_here text[];
    got text[] := '{}';
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN ARRAY(SELECT m.id FROM unnest(ids) AS m(id) WHERE pg_try_advisory_xact_lock(2, hashtext(m.id)));
    END IF;
    FOR bucket_value, group_ids IN
        SELECT subsync_work_bucket(m.id), array_agg(m.id ORDER BY m.id) FROM unnest(ids) AS m(id) GROUP BY 1 ORDER BY 1
    LOOP
        got_here := ARRAY(
            SELECT m.id FROM work_anchors w CROSS JOIN unnest(group_ids) AS m(id)
            WHERE w.bucket = bucket_value AND pg_try_advisory_xact_lock(2, hashtext(m.id)));
        -- Fewer than asked: held by others, or no anchor row for this bucket (then here).
        IF cardinality(got_here) < cardinality(group_ids)
           AND NOT EXISTS (SELECT 1 FROM work_anchors w WHERE w.bucket = bucket_value) THEN
            got_here := ARRAY(SELECT m.id FROM unnest(group_ids) AS m(id) WHERE pg_try_advisory_xact_lock(2, hashtext(m.id)));
        END IF;
        got := got || got_here;
    END LOOP;
    RETURN got;
END
$$;

-- Waits for the advisory lock of account `id`.
CREATE OR REPLACE FUNCTION subsync_wait_account_lock(id text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        PERFORM pg_advisory_xact_lock(2, hashtext(id)) FROM work_anchors w WHERE w.bucket = subsync_work_bucket(id);
        IF FOUND THEN
            RETURN;
        END IF;
    END IF;
    PERFORM pg_advisory_xact_lock(2, hashtext(id));
END
$$;

-- The lock functions of sql/0025, 0033 and 0044 with the advisory lock above: the same
-- statements otherwise.
CREATE OR REPLACE FUNCTION subsync_lock_account_states(account_ids text[], skip_locked boolean, placeholder_tier text DEFAULT NULL::text, placeholder_state json DEFAULT NULL::json) RETURNS TABLE(account_id text, state json, last_sequence bigint, resolved_at timestamp with time zone)
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    AS $$
#variable_conflict use_column
DECLARE
    id text;
BEGIN
    FOREACH id IN ARRAY account_ids LOOP
        IF skip_locked THEN
            RETURN QUERY SELECT s.account_id, s.state, s.last_sequence, s.resolved_at
                FROM account_states s WHERE s.account_id = id FOR UPDATE SKIP LOCKED;
        ELSE
            RETURN QUERY SELECT s.account_id, s.state, s.last_sequence, s.resolved_at
                FROM account_states s WHERE s.account_id = id FOR UPDATE;
        END IF;
        CONTINUE WHEN FOUND OR placeholder_state IS NULL;
        -- Not returned: missing, or (skipping) held by another transaction.
        IF skip_locked THEN
            CONTINUE WHEN EXISTS (SELECT 1 FROM account_states s WHERE s.account_id = id);
            CONTINUE WHEN cardinality(subsync_try_account_locks(ARRAY[id])) = 0;
        ELSE
            PERFORM subsync_wait_account_lock(id);
        END IF;
        -- -infinity: never resolved (ResolutionEngine.LockedState).
        RETURN QUERY INSERT INTO account_states AS s (account_id, tier, state, resolved_at)
            VALUES (id, placeholder_tier, placeholder_state, '-infinity')
            ON CONFLICT (account_id) DO NOTHING
            RETURNING s.account_id, s.state, s.last_sequence, s.resolved_at;
        CONTINUE WHEN FOUND;
        -- Created by another transaction that has committed since the lookup.
        IF skip_locked THEN
            RETURN QUERY SELECT s.account_id, s.state, s.last_sequence, s.resolved_at
                FROM account_states s WHERE s.account_id = id FOR UPDATE SKIP LOCKED;
        ELSE
            RETURN QUERY SELECT s.account_id, s.state, s.last_sequence, s.resolved_at
                FROM account_states s WHERE s.account_id = id FOR UPDATE;
        END IF;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION subsync_lock_account_states_to_resolve(account_ids text[], skip_locked boolean) RETURNS TABLE(account_id text, state json, last_sequence bigint, resolved_at timestamp with time zone)
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    AS $$
#variable_conflict use_column
DECLARE
    id text;
BEGIN
    FOREACH id IN ARRAY account_ids LOOP
        IF skip_locked THEN
            RETURN QUERY SELECT s.account_id, s.state, s.last_sequence, s.resolved_at
                FROM account_states s WHERE s.account_id = id FOR UPDATE SKIP LOCKED;
        ELSE
            RETURN QUERY SELECT s.account_id, s.state, s.last_sequence, s.resolved_at
                FROM account_states s WHERE s.account_id = id FOR UPDATE;
        END IF;
        CONTINUE WHEN FOUND;
        -- Not returned: missing, or (skipping) held by another transaction.
        IF skip_locked THEN
            CONTINUE WHEN EXISTS (SELECT 1 FROM account_states s WHERE s.account_id = id);
            CONTINUE WHEN cardinality(subsync_try_account_locks(ARRAY[id])) = 0;
        ELSE
            PERFORM subsync_wait_account_lock(id);
        END IF;
        -- Created by another transaction that has committed since the first look.
        RETURN QUERY SELECT s.account_id, s.state, s.last_sequence, s.resolved_at
            FROM account_states s WHERE s.account_id = id FOR UPDATE;
        CONTINUE WHEN FOUND;
        -- Reserved: no row yet (-infinity: never resolved, ResolutionEngine.LockedState).
        RETURN QUERY SELECT id, NULL::json, 0::bigint, '-infinity'::timestamptz;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION subsync_lock_account_states_by_bucket(account_ids text[]) RETURNS TABLE(account_id text, state json, last_sequence bigint, resolved_at timestamp with time zone)
    LANGUAGE plpgsql
    AS $$
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
        OPEN groups FOR
            SELECT array_agg(a ORDER BY a) FROM unnest(account_ids) AS a
            GROUP BY get_shard_id_for_distribution_column('account_states', a)
            ORDER BY min(a);
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
        reserved := subsync_try_account_locks(ARRAY(
            SELECT m.id FROM (SELECT unnest(accounts) EXCEPT SELECT unnest(existing)) AS m(id) ORDER BY m.id));
        CONTINUE WHEN cardinality(reserved) = 0;
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
