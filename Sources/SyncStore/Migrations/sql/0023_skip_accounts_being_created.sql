-- A worker's batch skips an account another transaction is creating, as it skips one another
-- transaction holds (docs/PERFORMANCE.md item 19).
--
-- With `skip_locked`, `subsync_lock_accounts` (sql/0014) left out an existing account that
-- another transaction had locked, but a *new* account that another transaction had just
-- created (its placeholder row inserted, not committed) was waited for: `INSERT ... ON CONFLICT
-- DO NOTHING` must know whether the other insert commits. That other transaction is a worker's
-- whole batch, so during `scripts/bench/signed`'s unsigned stage (2,000 new accounts picked at
-- random by 32 connections) the function averaged 350 ms a call.
--
-- This function, which creates every account's row (but for the rows an operator's
-- `reconcile` repair inserts, which are waited for as before), now first takes a
-- transaction-scoped advisory lock on the account (class 2 of the two-key form, keyed by the
-- account id's 32-bit hash). The skipping caller only tries it, and leaves the account out when
-- another transaction has it; the waiting caller waits for it, as it waited for the insert
-- before. The lock is taken only when the row is not there yet, in the callers' sorted order.
-- Two accounts whose ids share a hash share the lock: they may skip or wait for each other, and
-- two waiting callers may deadlock on them, which PostgreSQL detects (40P01) and the batch
-- retries. Citus runs this function on the coordinator, where the advisory locks live.
--
-- The row is now looked for first, with the lock: an existing account (the common case once an
-- app is live) takes one statement instead of sql/0014's insert attempt and lock. A missing one
-- takes three (the lookup, the existence check or the advisory lock, the insert, which returns
-- the new row: a row this transaction inserted is its own until it commits).
CREATE OR REPLACE FUNCTION subsync_lock_accounts(
    account_ids text[], skip_locked boolean, placeholder_tier text DEFAULT NULL, placeholder_state jsonb DEFAULT NULL)
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
