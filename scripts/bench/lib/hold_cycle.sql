-- pgbench baseline for a hold cycle in raw SQL: what POST .../usage/holds and .../settle do,
-- minus the service (lock the account's row, read the balance and the open holds, insert the
-- hold; then lock again, write the usage, end the hold). :accounts accounts.
\set a random(1, :accounts)
BEGIN;
INSERT INTO account_states (account_id, tier, state, resolved_at) VALUES ('raw-' || :a, 'free', '{}'::jsonb, '-infinity') ON CONFLICT DO NOTHING;
SELECT account_id FROM account_states WHERE account_id = 'raw-' || :a FOR UPDATE;
SELECT kind, units, at, period_end FROM usage_entries WHERE account_id = 'raw-' || :a AND meter = 'minutes';
SELECT COALESCE(sum(units), 0) FROM usage_holds WHERE account_id = 'raw-' || :a AND meter = 'minutes' AND status = 'open' AND expires_at > now();
INSERT INTO usage_holds (account_id, hold_id, meter, device_id, units, created_at, expires_at)
VALUES ('raw-' || :a, md5(random()::text || clock_timestamp()::text)::uuid, 'minutes', 'bench', 1, now(), now() + interval '60 seconds');
COMMIT;
BEGIN;
SELECT account_id FROM account_states WHERE account_id = 'raw-' || :a FOR UPDATE;
INSERT INTO usage_entries (account_id, meter, entry_id, kind, units, at, device_id)
VALUES ('raw-' || :a, 'minutes', 'usage:' || md5(random()::text || clock_timestamp()::text), 'usage', 1, now(), 'bench');
UPDATE usage_holds SET status = 'settled', settled_units = 1, ended_at = now()
WHERE account_id = 'raw-' || :a AND status = 'open' AND hold_id = (SELECT hold_id FROM usage_holds WHERE account_id = 'raw-' || :a AND status = 'open' LIMIT 1);
COMMIT;
