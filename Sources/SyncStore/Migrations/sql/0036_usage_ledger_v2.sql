-- Usage ledger, second version (docs/USAGE.md): allowance periods are derived from an account's
-- transactions whenever a balance is computed, never recorded, so the bill is a function of the
-- facts and not of what the service knew when usage arrived. The allowance rows earlier versions
-- recorded are no longer read; `subsync reconcile` reports the ones the facts do not justify and
-- removes them.
--
-- * usage_periods.revision_due: a closed period's totals changed after they were announced (late
--   usage, a late report). Writers mark it; the expiry sweeper announces the revision, so any
--   number of late changes between two sweeps is one `usage.period_closed`.
-- * devices: usage cannot be dated before its device first reached the service. Devices that
--   have only ever reported usage had no row (only syncs recorded devices): each gets one, first
--   seen at its earliest usage, so what is stored keeps its periods.
--
-- * usage_totals: the sums of each account's recorded entries per allowance period and meter
--   (SyncStore's UsageTotals), kept up to date by every insert, so a balance reads a row a period
--   instead of every entry: a write costs the same at 100 and 100,000 entries. Created lazily
--   from the entries (the first balance computed under the account's lock stores its rows).
-- * usage_entries_by_time: the entries of one account and meter in a span of time, in the order
--   the API pages them (time, then id): a period's sums when its row is created, and a page of
--   entries read without sorting the period.
--
-- One DO block, each statement EXECUTEd on its own: Citus sends a DDL statement's text to the
-- shards as it is and refuses several commands in one (sql/0019).
DO $$
BEGIN
    EXECUTE 'ALTER TABLE usage_periods ADD COLUMN IF NOT EXISTS revision_due boolean NOT NULL DEFAULT false';
    EXECUTE 'CREATE INDEX IF NOT EXISTS usage_periods_revision_due ON usage_periods (period_end) WHERE revision_due';
    EXECUTE 'CREATE TABLE IF NOT EXISTS usage_totals ('
        || 'account_id text NOT NULL, meter text NOT NULL, period_start timestamptz NOT NULL, period_end timestamptz NOT NULL, '
        || 'used bigint NOT NULL DEFAULT 0, rewards bigint NOT NULL DEFAULT 0, credits bigint NOT NULL DEFAULT 0, '
        || 'debits bigint NOT NULL DEFAULT 0, entries bigint NOT NULL DEFAULT 0, '
        || 'PRIMARY KEY (account_id, meter, period_start, period_end))';
    EXECUTE 'CREATE INDEX IF NOT EXISTS usage_entries_by_time ON usage_entries (account_id, meter, at, entry_id)';
    EXECUTE 'INSERT INTO devices (account_id, device_id, first_seen_at, last_seen_at) '
        || 'SELECT account_id, device_id, min(at), max(recorded_at) FROM usage_entries '
        || 'WHERE kind = ''usage'' AND device_id IS NOT NULL GROUP BY account_id, device_id '
        || 'ON CONFLICT (account_id, device_id) DO UPDATE SET first_seen_at = LEAST(devices.first_seen_at, EXCLUDED.first_seen_at)';
END
$$;
