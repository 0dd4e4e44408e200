-- pgbench baseline: one transaction inserting 5 rows of report-like width.
INSERT INTO bench_rows (account_id, report_id, product_id, observed_at, expires_at)
VALUES ('a' || :client_id, md5(random()::text), 'voip.premium.monthly', now(), now() + interval '30 days'),
       ('a' || :client_id, md5(random()::text), 'voip.premium.monthly', now(), now() + interval '30 days'),
       ('a' || :client_id, md5(random()::text), 'voip.premium.monthly', now(), now() + interval '30 days'),
       ('a' || :client_id, md5(random()::text), 'voip.premium.monthly', now(), now() + interval '30 days'),
       ('a' || :client_id, md5(random()::text), 'voip.premium.monthly', now(), now() + interval '30 days');
