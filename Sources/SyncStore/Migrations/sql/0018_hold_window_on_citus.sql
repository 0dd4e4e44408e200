-- DeliveryStore.holdBlocked on Citus reads a window of the due deliveries, as it does on one
-- PostgreSQL (DeliveryStore.holdWindow): the form of sql/0014 read every due delivery of its
-- partition to find the few that wait behind a head that is not due, about a second a call at a
-- million due deliveries, every 10 seconds in every delivery loop.
--
-- The window is a time: the due time of the `front_window`-th due delivery of an enabled
-- endpoint, over every partition (what every claim reads first), found with ORDER BY ... OFFSET
-- ... LIMIT 1, which Citus answers by reading the first rows of each shard's deliveries_due and
-- merging them. The search for blocked heads then keeps the join it had (pushed down to the
-- shards, everything joined on account_id) with one condition more, next_attempt_at up to that
-- time. Deliveries due at exactly that time all count, so the window holds at least
-- `front_window` rows and more when many share it (one statement that made many deliveries,
-- such as `deliveries replay`); what lies further back is held when it comes to the front.
CREATE OR REPLACE FUNCTION subsync_hold_blocked_deliveries(
    now_at timestamptz, partition_index integer, partition_count integer, front_window integer)
RETURNS bigint
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    head record;
    held bigint := 0;
    moved bigint;
    front_end timestamptz;
BEGIN
    SELECT d.next_attempt_at INTO front_end
    FROM deliveries d JOIN webhook_endpoints w ON w.endpoint_id = d.endpoint_id AND w.enabled
    WHERE d.status = 'pending' AND d.next_attempt_at <= now_at
    ORDER BY d.next_attempt_at
    OFFSET GREATEST(front_window, 1) - 1 LIMIT 1;
    -- NULL: fewer than the window are due, so the window is all of them.
    front_end := COALESCE(front_end, now_at);
    FOR head IN
        SELECT DISTINCT h.account_id AS a, h.delivery_id AS id
        FROM deliveries f
        JOIN webhook_endpoints w ON w.endpoint_id = f.endpoint_id AND w.enabled
        CROSS JOIN LATERAL (
            SELECT first.account_id, first.delivery_id,
                   GREATEST(first.next_attempt_at, first.leased_until) AS blocked_until
            FROM deliveries first
            WHERE first.endpoint_id = f.endpoint_id AND first.account_id = f.account_id AND first.status = 'pending'
            ORDER BY first.event_sequence, first.delivery_id
            LIMIT 1
        ) h
        WHERE f.status = 'pending' AND f.next_attempt_at <= front_end
          AND mod(hashtext(f.account_id)::bigint + 2147483648, partition_count) = partition_index
          AND h.delivery_id <> f.delivery_id AND h.blocked_until > now_at
    LOOP
        WITH waiting AS (
            SELECT x.account_id, x.endpoint_id, x.event_sequence, x.delivery_id,
                   GREATEST(x.next_attempt_at, x.leased_until) AS blocked_until
            FROM deliveries x
            WHERE x.account_id = head.a AND x.delivery_id = head.id
              AND x.status = 'pending' AND GREATEST(x.next_attempt_at, x.leased_until) > now_at
            FOR SHARE SKIP LOCKED
        ), moved_rows AS (
            UPDATE deliveries f SET next_attempt_at = w.blocked_until
            FROM waiting w
            WHERE f.account_id = head.a AND f.endpoint_id = w.endpoint_id AND f.status = 'pending'
              AND (f.event_sequence, f.delivery_id) > (w.event_sequence, w.delivery_id) AND f.next_attempt_at <= now_at
            RETURNING 1)
        SELECT count(*) INTO moved FROM moved_rows;
        held := held + moved;
    END LOOP;
    RETURN held;
END
$$;

-- The three-argument form of sql/0014, for a process of the previous release still running
-- beside this one during an upgrade: the same, with the window of DeliveryStore.holdWindow.
CREATE OR REPLACE FUNCTION subsync_hold_blocked_deliveries(now_at timestamptz, partition_index integer, partition_count integer)
RETURNS bigint
LANGUAGE sql AS $$
    SELECT subsync_hold_blocked_deliveries(now_at, partition_index, partition_count, 10000)
$$;
