-- Taking device tokens back (issue #52 item 5): per account, every account token issued before
-- `revoked_before` is refused (401 token_revoked), whatever its `exp`. Written by
-- `subsync tokens revoke` and `POST /v1/admin/accounts/{id}/revoke-tokens` (audited in
-- operator_actions). Each serve process holds every line in memory and reads what changed every
-- few seconds (by `changed_at`, the database's clock), so a device request costs no read. A second
-- revocation moves the line forward, never back. Local to the coordinator on Citus, like
-- operator_actions: never joined with distributed tables.
CREATE TABLE IF NOT EXISTS token_revocations (
    account_id     text        PRIMARY KEY,
    revoked_before timestamptz NOT NULL,
    revoked_at     timestamptz NOT NULL,
    actor          text        NOT NULL,
    reason         text,
    changed_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS token_revocations_by_change ON token_revocations (changed_at);
