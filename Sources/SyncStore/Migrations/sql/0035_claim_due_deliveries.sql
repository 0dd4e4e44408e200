-- The delivery claim Citus runs, as `subsync_claim_deliveries` (sql/0014, 0027) with one more
-- column, `attempts_before_retry` (sql/0034). A function's result type cannot be changed in
-- place, and `scripts/citus` applies the migrations from 0016 on again (sql/0027 recreates the
-- old one), so this one has a name of its own. The old one stays for the processes of the
-- previous release while a cluster is upgraded one process at a time; nothing of this release
-- calls it.
CREATE OR REPLACE FUNCTION subsync_claim_due_deliveries(
    claim_limit integer, follower_limit integer, now_at timestamptz, lease_until timestamptz,
    partition_index integer, partition_count integer)
RETURNS TABLE (account_id text, delivery_id bigint, endpoint_id uuid, event_id uuid, event_sequence bigint,
               attempts integer, event_type text, occurred_at timestamptz, payload text, url text,
               secret text, previous_secret text, failing_since timestamptz, attempts_before_retry integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    head record;
    leased bigint[];
    followers_left integer := claim_limit;
BEGIN
    FOR head IN
        SELECT d.account_id AS a, d.delivery_id AS id, d.endpoint_id AS e, d.event_sequence AS s FROM deliveries d
        JOIN webhook_endpoints w ON w.endpoint_id = d.endpoint_id AND w.enabled
        WHERE d.status = 'pending' AND d.next_attempt_at <= now_at
          AND (d.leased_until IS NULL OR d.leased_until <= now_at)
          AND mod(hashtext(d.account_id)::bigint + 2147483648, partition_count) = partition_index
          -- The stream's first pending delivery, as an ordered LIMIT 1 (sql/0005).
          AND d.delivery_id = (
              SELECT first.delivery_id FROM deliveries first
              WHERE first.account_id = d.account_id AND first.endpoint_id = d.endpoint_id AND first.status = 'pending'
              ORDER BY first.event_sequence, first.delivery_id
              LIMIT 1)
          -- Not while a sender has any of the stream's pending deliveries.
          AND NOT EXISTS (
              SELECT 1 FROM deliveries busy
              WHERE busy.endpoint_id = d.endpoint_id AND busy.account_id = d.account_id AND busy.status = 'pending'
                AND busy.leased_until > now_at)
        ORDER BY d.next_attempt_at
        LIMIT claim_limit
    LOOP
        PERFORM 1 FROM deliveries x WHERE x.account_id = head.a AND x.delivery_id = head.id FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        -- A new statement, so a new snapshot: everything is checked again as committed now.
        WITH lease AS (
            UPDATE deliveries x SET leased_until = lease_until
            WHERE x.account_id = head.a AND x.delivery_id = head.id AND x.status = 'pending'
              AND x.next_attempt_at <= now_at AND (x.leased_until IS NULL OR x.leased_until <= now_at)
              AND NOT EXISTS (
                  SELECT 1 FROM deliveries busy
                  WHERE busy.endpoint_id = head.e AND busy.account_id = head.a AND busy.status = 'pending'
                    AND busy.leased_until > now_at)
              AND NOT EXISTS (
                  SELECT 1 FROM deliveries earlier
                  WHERE earlier.account_id = head.a AND earlier.endpoint_id = head.e AND earlier.status = 'pending'
                    AND (earlier.event_sequence, earlier.delivery_id) < (head.s, head.id))
            RETURNING x.delivery_id)
        SELECT array_agg(lease.delivery_id) INTO leased FROM lease;
        CONTINUE WHEN leased IS NULL;
        -- What waits behind the head goes out right after it; nobody else holds those rows.
        IF followers_left > 0 THEN
            WITH behind AS (
                UPDATE deliveries x SET leased_until = lease_until
                WHERE x.account_id = head.a AND x.delivery_id IN (
                    SELECT b.delivery_id FROM deliveries b
                    WHERE b.account_id = head.a AND b.endpoint_id = head.e AND b.status = 'pending'
                      AND (b.event_sequence, b.delivery_id) > (head.s, head.id)
                    ORDER BY b.event_sequence, b.delivery_id
                    LIMIT least(follower_limit, followers_left))
                RETURNING x.delivery_id)
            SELECT leased || COALESCE(array_agg(behind.delivery_id), '{}') INTO leased FROM behind;
            followers_left := followers_left - (cardinality(leased) - 1);
        END IF;
        RETURN QUERY
            SELECT l.account_id, l.delivery_id, l.endpoint_id, l.event_id, l.event_sequence, l.attempts,
                   e.type, e.occurred_at, e.payload::text, w.url, w.secret,
                   CASE WHEN w.previous_secret_expires_at > now_at THEN w.previous_secret END,
                   w.failing_since, l.attempts_before_retry
            FROM deliveries l
            JOIN events e ON e.account_id = l.account_id AND e.sequence = l.event_sequence
            JOIN webhook_endpoints w ON w.endpoint_id = l.endpoint_id
            WHERE l.account_id = head.a AND l.delivery_id = ANY(leased)
            ORDER BY l.event_sequence, l.delivery_id;
    END LOOP;
END
$$;
