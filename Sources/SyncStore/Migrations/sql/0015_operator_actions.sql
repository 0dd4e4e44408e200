-- The operator actions audit log (issue #17): what an operator did through the admin API (the
-- console's actions) that is not itself stored as data. Revoke and unrevoke are already audited
-- as admin reports (sql/0004) and are not repeated here; reconciling an account, retrying or
-- cancelling a delivery and retrying dead deliveries are. The console shows an account's rows
-- in its timeline and the new row after each action.
-- Not per-account (retrying dead deliveries names an endpoint, not an account): on Citus it
-- stays local to the coordinator, like reconcile_checkpoints (`subsync distribute` leaves it).
CREATE TABLE IF NOT EXISTS operator_actions (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at         timestamptz NOT NULL,
    actor      text        NOT NULL,
    action     text        NOT NULL,  -- reconcile, reconcile_dry_run, delivery_retry, delivery_cancel, dead_deliveries_retry
    account_id text,                  -- when the action was about one account
    target     text,                  -- the delivery or endpoint it was about
    reason     text,
    outcome    text        NOT NULL   -- what it did, in words (differences found, deliveries retried, ...)
);
CREATE INDEX IF NOT EXISTS operator_actions_by_account ON operator_actions (account_id, at) WHERE account_id IS NOT NULL;
