-- pgbench baseline for usage ingestion: one transaction inserting 50 ledger entries (idempotent
-- on their id, as the service does) for a random account of 10,000.
\set a random(1, 10000)
INSERT INTO usage_entries (account_id, meter, entry_id, kind, units, at, device_id)
SELECT 'raw-' || :a, 'minutes', 'usage:' || md5(random()::text || clock_timestamp()::text || g), 'usage', 1 + (random() * 29)::int,
       now() - random() * interval '1 hour', 'bench'
FROM generate_series(1, 50) AS g
ON CONFLICT DO NOTHING;
