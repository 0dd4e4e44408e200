-- Holds (issue #13, docs/USAGE.md): units an online device reserves before it spends them (a
-- call about to start). A hold is granted under the account's row lock (account_states ... FOR
-- UPDATE), against the balance minus every open hold, so two devices racing for the last minutes
-- cannot both get them, whatever process answers each. A hold ends settled (its usage written to
-- the ledger), released, or expired (an open hold past expires_at counts for nothing).
CREATE TABLE IF NOT EXISTS usage_holds (
    account_id  text NOT NULL,
    hold_id     uuid NOT NULL,
    meter       text NOT NULL,
    device_id   text NOT NULL,
    units       bigint NOT NULL CHECK (units > 0),
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    status      text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'settled', 'released')),
    settled_units bigint,
    ended_at    timestamptz,
    PRIMARY KEY (account_id, hold_id)
);
-- The open holds of an account, read on every new hold.
CREATE INDEX IF NOT EXISTS usage_holds_open ON usage_holds (account_id, meter) WHERE status = 'open';
