-- Final usage periods (docs/USAGE.md, "Final periods"): a period that ended more than 90 days ago
-- (the longest late window) is final. Its allowance, tier and totals are stored and never derived
-- again, so a late App Store fact (a purchase or a move reported months later) cannot re-derive
-- old periods or re-announce them, and a balance walks the account's history only from the last
-- final period on.
--
-- * usage_totals.final, .allowance (NULL: unlimited), .tier: a final period's row as it was when
--   it became final. Rows that are not final keep being derived as before.
-- * usage_entries.counted_at: where an entry counts when it is dated inside a final period (a
--   credit of a purchase reported late): the end of the last final period, so it counts in the
--   first open one. NULL (almost always): it counts at its `at`. Set once, when the entry is
--   written; the entry's facts (`at`, units) are never changed.
--
-- One DO block, each statement EXECUTEd on its own (Citus, sql/0019).
DO $$
BEGIN
    EXECUTE 'ALTER TABLE usage_totals ADD COLUMN IF NOT EXISTS final boolean NOT NULL DEFAULT false';
    EXECUTE 'ALTER TABLE usage_totals ADD COLUMN IF NOT EXISTS allowance bigint';
    EXECUTE 'ALTER TABLE usage_totals ADD COLUMN IF NOT EXISTS tier text';
    EXECUTE 'ALTER TABLE usage_entries ADD COLUMN IF NOT EXISTS counted_at timestamptz';
    EXECUTE 'CREATE INDEX IF NOT EXISTS usage_entries_counted ON usage_entries (account_id, meter, counted_at) WHERE counted_at IS NOT NULL';
END
$$;
