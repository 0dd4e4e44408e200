-- Usage events (issue #13, docs/USAGE.md "Events"): what each allowance period of an account's
-- meter has announced, so `usage.low` and `usage.exhausted` fire once per crossing and
-- `usage.period_closed` once per period (then once per revision of its totals), whichever process
-- evaluates the account. A row exists for every period that had usage; the expiry sweeper visits
-- the accounts whose periods have ended unclosed (`usage_periods_due`) to close them.
-- Keyed by account first, like every per-account table (Citus: distributed by account_id).
CREATE TABLE IF NOT EXISTS usage_periods (
    account_id      text        NOT NULL,
    meter           text        NOT NULL,
    period_start    timestamptz NOT NULL,
    period_end      timestamptz NOT NULL,
    low             boolean     NOT NULL DEFAULT false,
    exhausted       boolean     NOT NULL DEFAULT false,
    closed_revision integer     NOT NULL DEFAULT 0,   -- 0: not closed yet
    closed_totals   jsonb,                            -- the totals the last usage.period_closed carried
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, meter, period_start, period_end)
);
CREATE INDEX IF NOT EXISTS usage_periods_due ON usage_periods (period_end) WHERE closed_revision = 0;

-- Events written by device usage and holds, and by rewarded ads. NOT VALID, then VALIDATE: the
-- check of the existing rows does not hold a lock that stops event writes on a large table.
ALTER TABLE events DROP CONSTRAINT IF EXISTS events_origin_check;
ALTER TABLE events ADD CONSTRAINT events_origin_check
    CHECK (origin IN ('worker', 'sweeper', 'reconcile', 'admin', 'store', 'transfer', 'usage', 'reward')) NOT VALID;
ALTER TABLE events VALIDATE CONSTRAINT events_origin_check;
