-- Asking the App Store before taking access away (docs/STORE.md, "Before an expiry"): one row per
-- question about a subscription's expiry, so a transaction is asked about at most once per
-- period (an answer is final; a failed question is tried again, at most once a minute, until the
-- bound). Per account, distributed by account_id with the other per-account tables.
CREATE TABLE IF NOT EXISTS store_expiry_checks (
    account_id              text        NOT NULL,
    original_transaction_id text        NOT NULL,
    expires_at              timestamptz NOT NULL,
    asked_at                timestamptz NOT NULL,
    attempts                integer     NOT NULL DEFAULT 1,
    outcome                 text        NOT NULL,
    PRIMARY KEY (account_id, original_transaction_id, expires_at)
);
