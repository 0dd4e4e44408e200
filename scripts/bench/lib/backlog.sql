-- The end-to-end resolution benchmark's backlog (scripts/bench/pipeline, scripts/bench/citus): :backlog
-- pending reports, 5 per account and 2 transactions each, written straight into the inbox, and
-- their accounts queued as a sync would queue them (sql/0014). Committed together.
-- usage: psql -v backlog=N -f scripts/bench/lib/backlog.sql
BEGIN;
INSERT INTO reports (account_id, report_id, device_id, observed_at, product_id, original_transaction_id, transaction_id, purchased_at, expires_at, will_auto_renew)
SELECT 'acct-' || (n / 5), 'r-' || n, 'device-' || (n % 3), now() - (n % 50) * interval '1 minute', 'voip.premium.monthly',
       'tx-' || (n / 5) || '-' || (n % 2), 'tx-' || (n / 5) || '-' || (n % 2), now() - interval '2 days',
       now() + ((n % 30) + 1) * interval '1 day', true
FROM generate_series(0, :backlog - 1) AS n;
INSERT INTO account_work (bucket, account_id) SELECT subsync_work_bucket('acct-' || a), 'acct-' || a FROM generate_series(0, :backlog / 5 - 1) AS a;
COMMIT;
