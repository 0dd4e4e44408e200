-- A worker's claim on one PostgreSQL locks its accounts in three statements instead of three or
-- four per account (docs/PERFORMANCE.md item 32). `subsync_lock_account_states_to_resolve`
-- (sql/0025, 0032) runs a statement per account because Citus refuses a `FOR UPDATE` that spans
-- shards; on one server the same answer comes from statements over the whole array. The service
-- calls this function only when the database is not a Citus one (DatabaseTopology), and only to
-- skip what is held: `SKIP LOCKED` and `pg_try_advisory_xact_lock` never wait, so the order in which
-- rows and reservations are taken cannot deadlock.
--
-- It returns what `subsync_lock_account_states_to_resolve(account_ids, true)` returns:
--   * every existing row no other transaction holds, locked;
--   * every account without a row that no other transaction is creating (its advisory lock,
--     sql/0023, is free): reserved under that lock, with a NULL state, 0 and -infinity;
--   * nothing for the rest (rows held by another transaction, accounts another is creating, and
--     rows committed between the first look and the second), which the caller queues again.
-- Each statement takes a new snapshot, as each of the per-account function's statements does.
CREATE OR REPLACE FUNCTION subsync_lock_account_states_skipping(account_ids text[])
RETURNS TABLE (account_id text, state json, last_sequence bigint, resolved_at timestamptz)
LANGUAGE plpgsql
SET enable_seqscan = off -- sql/0022: the key's plan, whatever the table's size when cached
AS $$
#variable_conflict use_column
DECLARE
    reserved text[];
BEGIN
    RETURN QUERY SELECT s.account_id, s.state, s.last_sequence, s.resolved_at
        FROM account_states s WHERE s.account_id = ANY(account_ids)
        FOR UPDATE SKIP LOCKED;
    -- Accounts without a row, each tried under its advisory lock. MATERIALIZED: only these are
    -- tried, never an account that has a row.
    WITH missing AS MATERIALIZED (
        SELECT m.id FROM unnest(account_ids) AS m(id)
        WHERE NOT EXISTS (SELECT 1 FROM account_states s WHERE s.account_id = m.id)
    )
    SELECT array_agg(missing.id) INTO reserved FROM missing
    WHERE pg_try_advisory_xact_lock(2, hashtext(missing.id));
    IF reserved IS NULL THEN
        RETURN;
    END IF;
    -- A row created and committed between the look and the advisory lock is locked as it is
    -- (as the per-account function does); the others are reserved.
    RETURN QUERY
        WITH appeared AS MATERIALIZED (
            SELECT s.account_id, s.state, s.last_sequence, s.resolved_at
            FROM account_states s WHERE s.account_id = ANY(reserved)
            FOR UPDATE
        )
        SELECT a.account_id, a.state, a.last_sequence, a.resolved_at FROM appeared a
        UNION ALL
        SELECT r.id, NULL::json, 0::bigint, '-infinity'::timestamptz FROM unnest(reserved) AS r(id)
        WHERE NOT EXISTS (SELECT 1 FROM appeared a WHERE a.account_id = r.id);
END
$$;
