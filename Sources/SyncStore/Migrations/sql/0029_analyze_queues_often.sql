-- Autovacuum analyzes the tables whose pending share swings (reports, deliveries, the claim
-- queue) after 1 % of their rows and 1,000 more have changed, instead of 10 % and 50
-- (docs/PERFORMANCE.md item 28).
--
-- The plans of the claims depend on how many rows are pending. In a steady state almost none
-- are; a backlog (workers stopped while devices sync, an import, a replay of a month of events
-- to a new endpoint) can be a few per cent of a large table, which the default thresholds let
-- go unnoticed for as long as the backlog lasts. The statements are written to stay by key
-- whatever the statistics (sql/0028; `DeliveryStore.record`), but the delivery claim's scan of
-- due deliveries still reads every pending one when statistics say there are almost none. An
-- analyze samples at most 30,000 rows, a few tens of milliseconds, and autovacuum looks at a
-- table at most once a minute (autovacuum_naptime).
--
-- One DO block, each EXECUTE a statement of its own, for Citus, which applies the storage
-- parameters to every shard (README, "Migrations"); running it twice changes nothing.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE reports SET (autovacuum_analyze_scale_factor = 0.01, autovacuum_analyze_threshold = 1000)';
    EXECUTE 'ALTER TABLE deliveries SET (autovacuum_analyze_scale_factor = 0.01, autovacuum_analyze_threshold = 1000)';
    EXECUTE 'ALTER TABLE account_work SET (autovacuum_analyze_scale_factor = 0.01, autovacuum_analyze_threshold = 1000)';
END
$$;
