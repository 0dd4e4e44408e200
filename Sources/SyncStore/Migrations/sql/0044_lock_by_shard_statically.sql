-- The account locks of sql/0043 with the shard lookup as a static statement: PL/pgSQL plans a
-- static statement once per session, where `EXECUTE` parsed and planned the grouping on every
-- call. It names `get_shard_id_for_distribution_column`, which exists only with Citus; PL/pgSQL
-- resolves a statement's functions when the statement first runs, and that branch runs only on
-- a Citus cluster (docs/CITUS.md, "How the pipeline runs on Citus"). Otherwise as in sql/0043.
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
