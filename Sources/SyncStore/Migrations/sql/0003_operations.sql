-- Operator commands (subsync reconcile, revoke, prune).

-- Where an interrupted `subsync reconcile --all` stopped, so `--resume` can go on from there.
-- One row per kind of run (`name`, e.g. 'all' or 'all since 2026-11-01T00:00:00Z'); it is a
-- global table of the operators, not per-account data.
CREATE TABLE reconcile_checkpoints (
    name             text        NOT NULL PRIMARY KEY,
    last_account_id  text        NOT NULL,
    dry_run          boolean     NOT NULL,
    accounts_done    bigint      NOT NULL DEFAULT 0,
    differences      bigint      NOT NULL DEFAULT 0,
    started_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- `subsync revoke --transaction T` finds the account from the transaction id alone.
CREATE INDEX transactions_by_transaction_id ON transactions (transaction_id);
