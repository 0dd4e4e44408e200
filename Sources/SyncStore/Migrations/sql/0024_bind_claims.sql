-- Binding a signed sync's purchases and tokens to its account in one statement instead of three
-- to five (docs/PERFORMANCE.md item 21). `TransactionBinder` used to send, inside the sync's
-- transaction: the purchases' advisory locks, the owners' insert, `subsync_lock_transaction_owners`,
-- and with tokens their insert and `subsync_lock_app_account_tokens`. Each statement is a round
-- trip to PostgreSQL and two thread switches in serve; during `scripts/bench/signed` context
-- switches and futex waits were 30 % of serve's samples (perf, 2026-11-25).
--
-- The function takes the same locks in the same order as those statements did, so the rules of
-- `TransactionBinder` and of the store notifications that share the purchases' advisory lock
-- (`TransactionBinder.lockPurchases`) are unchanged:
-- 1. the purchases' advisory locks, in the callers' sorted order;
-- 2. the owners' insert (`ON CONFLICT DO NOTHING`: a concurrent first binding of a purchase
--    waits here for the other transaction and then sees its row);
-- 3. each owner row locked `FOR UPDATE`, one row at a time (one shard each on Citus);
-- 4. with tokens, their insert and each token row locked the same way.
-- Returns one row per purchase (`purchase`, its id, its owner, whether this call bound it) and
-- one per token (`token`, the token as text, the account it names, false).
--
-- Both arrays must be sorted and free of duplicates. Citus runs the function on the
-- coordinator, where the advisory locks live, as it runs the lock functions of sql/0014.
CREATE OR REPLACE FUNCTION subsync_bind_claims(bound_account text, purchase_ids text[], tokens uuid[])
RETURNS TABLE (claim_kind text, claim_key text, owner_account_id text, newly_bound boolean)
LANGUAGE plpgsql
SET enable_seqscan = off -- sql/0022: the key's plan, whatever the table's size when cached
AS $$
DECLARE
    purchase text;
    token uuid;
    inserted text[] := '{}';
BEGIN
    FOREACH purchase IN ARRAY purchase_ids LOOP
        PERFORM pg_advisory_xact_lock(hashtext('purchase:' || purchase));
    END LOOP;
    FOR purchase IN
        INSERT INTO transaction_owners AS o (original_transaction_id, account_id)
        SELECT p, bound_account FROM unnest(purchase_ids) AS p ORDER BY p
        ON CONFLICT (original_transaction_id) DO NOTHING
        RETURNING o.original_transaction_id
    LOOP
        inserted := inserted || purchase;
    END LOOP;
    FOREACH purchase IN ARRAY purchase_ids LOOP
        RETURN QUERY SELECT 'purchase'::text, o.original_transaction_id, o.account_id, o.original_transaction_id = ANY(inserted)
            FROM transaction_owners o WHERE o.original_transaction_id = purchase FOR UPDATE;
    END LOOP;
    IF cardinality(tokens) > 0 THEN
        INSERT INTO app_account_tokens AS t (app_account_token, account_id)
        SELECT k, bound_account FROM unnest(tokens) AS k ORDER BY k
        ON CONFLICT (app_account_token) DO NOTHING;
        FOREACH token IN ARRAY tokens LOOP
            RETURN QUERY SELECT 'token'::text, t.app_account_token::text, t.account_id, false
                FROM app_account_tokens t WHERE t.app_account_token = token FOR UPDATE;
        END LOOP;
    END IF;
END
$$;
