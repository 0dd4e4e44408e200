-- Usage and credits (issue #13, docs/USAGE.md): one immutable ledger per account and meter.
-- Every entry has an id from its source (an allowance period, a consumable's transaction, a
-- rewarded ad, a device's usage id, an operator's adjustment), so the same fact written twice is
-- one row; a meter's balance is a function of the set of rows (SyncCore's UsageBalance).
-- Keyed by account first, like every per-account table (Citus: distributed by account_id).
CREATE TABLE IF NOT EXISTS usage_entries (
    account_id  text NOT NULL,
    meter       text NOT NULL,
    entry_id    text NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('allowance', 'credit', 'credit_revoked', 'reward', 'usage', 'adjustment')),
    units       bigint CHECK (units IS NOT NULL OR kind = 'allowance'),  -- NULL: an unlimited allowance
    at          timestamptz NOT NULL,       -- a usage's time, a grant's time, an allowance period's start
    period_end  timestamptz CHECK ((period_end IS NOT NULL) = (kind = 'allowance')),
    device_id   text,                       -- the device that reported a usage
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, meter, entry_id)
);
