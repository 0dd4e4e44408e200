-- The backfill of missed App Store Server Notifications (docs/STORE.md, "Backfill"): one row per
-- backfill (today one, 'notifications'), with the checkpoint it has asked Get Notification
-- History up to and a lease, so one process of all `serve`s runs it at a time and a restarted one
-- resumes from the checkpoint. Local to the coordinator on Citus, like reconcile_checkpoints:
-- read and written by the backfill only, never joined with distributed tables.
CREATE TABLE IF NOT EXISTS store_backfill (
    name text PRIMARY KEY,
    checkpoint timestamptz,
    lease_owner text,
    lease_until timestamptz,
    last_run_at timestamptz,
    last_error text,
    notifications bigint NOT NULL DEFAULT 0
);
