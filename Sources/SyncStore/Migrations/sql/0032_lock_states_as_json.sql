-- The lock functions, returning the states as `json` now that the column is (sql/0031):
-- `subsync_lock_account_states` is sql/0023's `subsync_lock_accounts`, and
-- `subsync_lock_account_states_to_resolve` sql/0025's `subsync_lock_accounts_to_resolve`, with
-- the same bodies and the same `enable_seqscan = off` (sql/0022). New names, because a function's
-- result type cannot be replaced, and the earlier migrations must still run twice over this one
-- (`scripts/citus` applies them again on a distributed cluster).
--
-- The old names stay, as wrappers that cast to `jsonb`: the earlier migrations refer to them, and
-- a process of an earlier release still running while this one is deployed locks through them
-- (its resolution batches fail on the `json` columns all the same: stop it before migrating,
-- README "Upgrading past sql/0031").
CREATE OR REPLACE FUNCTION subsync_lock_account_states(
    account_ids text[], skip_locked boolean, placeholder_tier text DEFAULT NULL, placeholder_state json DEFAULT NULL)
RETURNS TABLE (account_id text, state json, last_sequence bigint, resolved_at timestamptz)
LANGUAGE plpgsql
SET enable_seqscan = off -- sql/0022: the key's plan, whatever the table's size when cached
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
            CONTINUE WHEN NOT pg_try_advisory_xact_lock(2, hashtext(id));
        ELSE
            PERFORM pg_advisory_xact_lock(2, hashtext(id));
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

CREATE OR REPLACE FUNCTION subsync_lock_account_states_to_resolve(account_ids text[], skip_locked boolean)
RETURNS TABLE (account_id text, state json, last_sequence bigint, resolved_at timestamptz)
LANGUAGE plpgsql
SET enable_seqscan = off -- sql/0022: the key's plan, whatever the table's size when cached
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
            CONTINUE WHEN NOT pg_try_advisory_xact_lock(2, hashtext(id));
        ELSE
            PERFORM pg_advisory_xact_lock(2, hashtext(id));
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

-- The earlier names (same signatures and results as before).
CREATE OR REPLACE FUNCTION subsync_lock_accounts(
    account_ids text[], skip_locked boolean, placeholder_tier text DEFAULT NULL, placeholder_state jsonb DEFAULT NULL)
RETURNS TABLE (account_id text, state jsonb, last_sequence bigint, resolved_at timestamptz)
LANGUAGE sql
AS $$
    SELECT l.account_id, l.state::jsonb, l.last_sequence, l.resolved_at
    FROM subsync_lock_account_states(account_ids, skip_locked, placeholder_tier, placeholder_state::json) AS l
$$;

CREATE OR REPLACE FUNCTION subsync_lock_accounts_to_resolve(account_ids text[], skip_locked boolean)
RETURNS TABLE (account_id text, state jsonb, last_sequence bigint, resolved_at timestamptz)
LANGUAGE sql
AS $$
    SELECT l.account_id, l.state::jsonb, l.last_sequence, l.resolved_at
    FROM subsync_lock_account_states_to_resolve(account_ids, skip_locked) AS l
$$;
