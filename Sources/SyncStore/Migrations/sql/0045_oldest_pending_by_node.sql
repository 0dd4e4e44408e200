-- The oldest pending reports on a Citus cluster that routes syncs to the accounts' nodes
-- (docs/CITUS.md, "How the pipeline runs on Citus").
--
-- `reports.arrival` is an identity column. On Citus each node numbers the rows it inserts in a
-- range of its own, [groupid << 48, (groupid + 1) << 48) (Citus's
-- `worker_adjust_identity_column_seq_ranges`; the coordinator, group 0, from 1), so once `serve`
-- inserts reports on the worker nodes, `ORDER BY arrival` sorts by node first and by time only
-- within a node. The statements that want the oldest pending reports (the sweeper's look for
-- reports without a claim queue entry, sql/0014; the resolution lag of `/metrics`, the console
-- and `subsync stats`) ask each node's range in turn, each through `reports_pending_by_arrival`
-- (sql/0028, whose `arrival > 0` they state). On one PostgreSQL there is one range.
--
-- The Citus branch names `pg_dist_node`, which exists only with Citus: PL/pgSQL resolves a
-- statement when it first runs, and that branch runs only on a cluster (as in sql/0044).

-- The ranges of `arrival` the nodes that insert reports number their rows in.
CREATE OR REPLACE FUNCTION subsync_arrival_ranges()
RETURNS TABLE (lower_bound bigint, upper_bound bigint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN QUERY SELECT greatest(1, g::bigint << 48), (g::bigint + 1) << 48
            FROM (SELECT DISTINCT n.groupid FROM pg_dist_node n WHERE n.noderole = 'primary') AS groups(g)
            ORDER BY 1;
    ELSE
        RETURN QUERY SELECT 1::bigint, 1::bigint << 48;
    END IF;
END
$$;

-- When the oldest pending report was received; NULL when none is pending.
CREATE OR REPLACE FUNCTION subsync_oldest_pending_received_at()
RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
DECLARE
    range record;
    found_at timestamptz;
    oldest timestamptz;
BEGIN
    FOR range IN SELECT * FROM subsync_arrival_ranges() LOOP
        SELECT r.received_at INTO found_at FROM reports r
        WHERE r.status = 'pending' AND r.arrival > 0
          AND r.arrival >= range.lower_bound AND r.arrival < range.upper_bound
        ORDER BY r.arrival LIMIT 1;
        IF found_at < oldest OR oldest IS NULL THEN
            oldest := found_at;
        END IF;
    END LOOP;
    RETURN oldest;
END
$$;

-- The accounts among the `per_range` oldest pending reports of each range that were received
-- at or before `received_before` (an account may come twice).
CREATE OR REPLACE FUNCTION subsync_stalled_accounts(per_range integer, received_before timestamptz)
RETURNS SETOF text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    range record;
BEGIN
    FOR range IN SELECT * FROM subsync_arrival_ranges() LOOP
        RETURN QUERY SELECT DISTINCT oldest.account_id FROM (
            SELECT r.account_id, r.received_at FROM reports r
            WHERE r.status = 'pending' AND r.arrival > 0
              AND r.arrival >= range.lower_bound AND r.arrival < range.upper_bound
            ORDER BY r.arrival LIMIT per_range) AS oldest
        WHERE oldest.received_at <= received_before;
    END LOOP;
END
$$;
