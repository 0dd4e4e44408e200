-- A worker's batch writes a new account's row once, with its resolved state, instead of a
-- placeholder first and the state over it (docs/PERFORMANCE.md item 22).
--
-- `subsync_lock_accounts` (sql/0014, 0022, 0023) creates a missing account's row with a
-- placeholder state, under the account's advisory lock, so that the batch holds a row lock;
-- the batch then updates that row with the resolved state. For a new account that is two row
-- versions and two sets of index entries for one row: pg_stat_statements during a drain of
-- 40,000 reports of 8,000 new accounts (one worker) put the placeholders' inserts and the
-- state updates at a fifth of PostgreSQL's time.
--
-- This function locks what exists as `subsync_lock_accounts` does, and *reserves* a missing
-- account instead of creating it: it takes the account's advisory lock (class 2 of the two-key
-- form, keyed by the account id's 32-bit hash: the lock every creator takes, sql/0023; the
-- skipping caller only tries it), looks again for a row another creator committed meanwhile,
-- and returns the account with a NULL state when there is still none. The caller inserts the
-- row before it commits, still under the advisory lock (ResolutionEngine.writeStates). Other
-- lockers of a reserved account wait for the advisory lock (`subsync_lock_accounts` in waiting
-- mode) or leave it out (skipping mode), as they do for an account being created. A row that
-- appears without the advisory lock (an operator's `reconcile` repair, sql/0023's exception)
-- makes the caller's insert fail: its batch rolls back and is retried account by account.
--
-- After the advisory lock the second look waits for the row's lock even in skipping mode: a
-- row created since the first look belongs to a creator that has committed, and only another
-- locker that came after it can hold it, which is rare and short. (Two accounts whose ids share
-- a 32-bit hash share the advisory lock: a batch waiting here and a locker waiting for that
-- lock can deadlock, which PostgreSQL detects, 40P01, and the batch is retried.)
CREATE OR REPLACE FUNCTION subsync_lock_accounts_to_resolve(account_ids text[], skip_locked boolean)
RETURNS TABLE (account_id text, state jsonb, last_sequence bigint, resolved_at timestamptz)
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
        RETURN QUERY SELECT id, NULL::jsonb, 0::bigint, '-infinity'::timestamptz;
    END LOOP;
END
$$;
