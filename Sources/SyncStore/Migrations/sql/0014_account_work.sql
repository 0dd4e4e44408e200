-- Claims that work on one PostgreSQL and on Citus (issue #18, DESIGN §9, README "Running on Citus").
--
-- Citus cannot run a `SELECT ... FOR UPDATE` that spans shards, and the old claim
-- (`SELECT ... FROM reports WHERE status = 'pending' ... FOR UPDATE SKIP LOCKED`) spans every
-- account. Workers now claim *accounts with work* from this small queue, then lock and read each
-- claimed account with statements that name it (one shard each on Citus).
--
-- One row per submission that stored something new (sync, store notifications, operator
-- commands, quarantined reports sent back): a plain insert, so a sync request never waits on a
-- worker holding the account. A worker claims rows with SKIP LOCKED, locks the accounts, deletes
-- every queue row of them it can see, then reads their pending reports: a report committed after
-- that read has a row the delete did not see, so it is claimed again (DESIGN §1: nothing lost).
--
-- On Citus this table is NOT distributed: it stays on the coordinator, where every claim runs
-- (`subsync distribute` leaves it local). Citus commits a submission on the coordinator a moment
-- before the worker node holding its reports, so a claim may see the row and not yet the
-- reports; the expiry sweeper re-queues accounts with reports pending for longer than a few
-- seconds and no row here, which covers that window (and any writer that forgets to queue).
CREATE TABLE IF NOT EXISTS account_work (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id text        NOT NULL,
    queued_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS account_work_by_account ON account_work (account_id);

-- Reports already pending when this migration runs keep their place in line.
INSERT INTO account_work (account_id)
SELECT account_id FROM reports WHERE status = 'pending' GROUP BY account_id ORDER BY min(arrival);

-- Locks the `account_states` rows of `account_ids`, one statement per account in the order given
-- (callers sort, so lockers cannot deadlock), and returns what the resolver reads. With
-- `skip_locked`, an account another transaction holds is left out instead of waited for. With a
-- `placeholder_state`, a missing row is first created with it (and `placeholder_tier`), in the
-- same order: two transactions creating rows for the same new accounts on different Citus nodes
-- in one multi-row insert could each wait for the other, a distributed deadlock.
-- One statement per account is what Citus can route to one shard; on one PostgreSQL it costs a
-- few microseconds per account inside this function, against the round trips it saves.
CREATE OR REPLACE FUNCTION subsync_lock_accounts(
    account_ids text[], skip_locked boolean, placeholder_tier text DEFAULT NULL, placeholder_state jsonb DEFAULT NULL)
RETURNS TABLE (account_id text, state jsonb, last_sequence bigint, resolved_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    id text;
BEGIN
    FOREACH id IN ARRAY account_ids LOOP
        IF placeholder_state IS NOT NULL THEN
            -- -infinity: never resolved (ResolutionEngine.LockedState).
            INSERT INTO account_states (account_id, tier, state, resolved_at)
            VALUES (id, placeholder_tier, placeholder_state, '-infinity')
            ON CONFLICT (account_id) DO NOTHING;
        END IF;
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

-- The same for the global purchase-owner lookup (distributed by original_transaction_id on
-- Citus): binding purchases to an account locks their owner rows in the order given.
CREATE OR REPLACE FUNCTION subsync_lock_transaction_owners(purchase_ids text[])
RETURNS TABLE (original_transaction_id text, account_id text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    id text;
BEGIN
    FOREACH id IN ARRAY purchase_ids LOOP
        RETURN QUERY SELECT o.original_transaction_id, o.account_id
            FROM transaction_owners o WHERE o.original_transaction_id = id FOR UPDATE;
    END LOOP;
END
$$;

-- And for app account tokens (distributed by app_account_token on Citus).
CREATE OR REPLACE FUNCTION subsync_lock_app_account_tokens(tokens uuid[])
RETURNS TABLE (app_account_token uuid, account_id text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    token uuid;
BEGIN
    FOREACH token IN ARRAY tokens LOOP
        RETURN QUERY SELECT t.app_account_token, t.account_id
            FROM app_account_tokens t WHERE t.app_account_token = token FOR UPDATE;
    END LOOP;
END
$$;

-- The delivery claim (DeliveryStore.claimDue, which documents the rules): due stream heads are
-- found without locks (one statement over every shard), then each is leased on its own: its row
-- locked without waiting (another claim has it: skipped) and its conditions read again on the
-- latest version, then the deliveries behind it leased with it. Every statement after the first
-- names one account: one shard on Citus. Returns the leased deliveries with what sending needs,
-- a stream's deliveries together and in sequence order.
CREATE OR REPLACE FUNCTION subsync_claim_deliveries(
    claim_limit integer, follower_limit integer, now_at timestamptz, lease_until timestamptz,
    partition_index integer, partition_count integer)
RETURNS TABLE (account_id text, delivery_id bigint, endpoint_id uuid, event_id uuid, event_sequence bigint,
               attempts integer, event_type text, occurred_at timestamptz, payload text, url text,
               secret text, previous_secret text, failing_since timestamptz)
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
          -- Not while a sender has any of the stream.
          AND NOT EXISTS (
              SELECT 1 FROM deliveries busy
              WHERE busy.account_id = d.account_id AND busy.endpoint_id = d.endpoint_id
                AND busy.leased_until IS NOT NULL AND busy.leased_until > now_at)
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
                  WHERE busy.account_id = head.a AND busy.endpoint_id = head.e
                    AND busy.leased_until IS NOT NULL AND busy.leased_until > now_at)
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
                   w.failing_since
            FROM deliveries l
            JOIN events e ON e.account_id = l.account_id AND e.sequence = l.event_sequence
            JOIN webhook_endpoints w ON w.endpoint_id = l.endpoint_id
            WHERE l.account_id = head.a AND l.delivery_id = ANY(leased)
            ORDER BY l.event_sequence, l.delivery_id;
    END LOOP;
END
$$;

-- DeliveryStore.holdBlocked, the same way: the due deliveries waiting behind a head that is not
-- due (retrying, or leased) are found without locks; each head is then locked FOR SHARE without
-- waiting and the deliveries behind it moved to its time, one account at a time.
CREATE OR REPLACE FUNCTION subsync_hold_blocked_deliveries(now_at timestamptz, partition_index integer, partition_count integer)
RETURNS bigint
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    head record;
    held bigint := 0;
    moved bigint;
BEGIN
    FOR head IN
        SELECT DISTINCT h.account_id AS a, h.delivery_id AS id
        FROM deliveries f
        CROSS JOIN LATERAL (
            SELECT first.account_id, first.delivery_id,
                   GREATEST(first.next_attempt_at, first.leased_until) AS blocked_until
            FROM deliveries first
            WHERE first.endpoint_id = f.endpoint_id AND first.account_id = f.account_id AND first.status = 'pending'
            ORDER BY first.event_sequence, first.delivery_id
            LIMIT 1
        ) h
        WHERE f.status = 'pending' AND f.next_attempt_at <= now_at
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
