-- Trust (issue #7): who owns a store purchase, which account an appAccountToken names, and the
-- App Store Server Notifications already handled.
--
-- These are lookups by the store's identifiers, made to *find* an account; on Citus they are
-- distributed by their own key (or kept as reference tables), not by account_id.

-- The account that owns an original transaction (a purchase and all its renewals). Bound by the
-- first verified report of it; moved only by the `transfer` binding policy.
CREATE TABLE transaction_owners (
    original_transaction_id  text        NOT NULL PRIMARY KEY,
    account_id               text        NOT NULL,
    bound_at                 timestamptz NOT NULL DEFAULT now(),
    transferred_from         text,
    transferred_at           timestamptz
);
CREATE INDEX transaction_owners_by_account ON transaction_owners (account_id);

-- The account an appAccountToken (the UUID an app sets on a purchase) names. Bound by the first
-- verified report that carries it.
CREATE TABLE app_account_tokens (
    app_account_token  uuid        NOT NULL PRIMARY KEY,
    account_id         text        NOT NULL,
    bound_at           timestamptz NOT NULL DEFAULT now()
);

-- Every App Store Server Notification V2 handled, once per notificationUUID (Apple retries and
-- may send one twice). `status`: applied (a report was stored), unmatched (no account known for
-- the purchase yet; `signed_payload` kept so it can be applied later), ignored (nothing to apply,
-- e.g. TEST).
CREATE TABLE store_notifications (
    notification_uuid        uuid        NOT NULL PRIMARY KEY,
    notification_type        text        NOT NULL,
    subtype                  text,
    status                   text        NOT NULL CHECK (status IN ('applied', 'unmatched', 'ignored')),
    account_id               text,
    original_transaction_id  text,
    signed_date              timestamptz,
    signed_payload           text,
    received_at              timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX store_notifications_unmatched ON store_notifications (original_transaction_id) WHERE status = 'unmatched';

-- Events written by a transfer between accounts.
ALTER TABLE events DROP CONSTRAINT events_origin_check;
ALTER TABLE events ADD CONSTRAINT events_origin_check
    CHECK (origin IN ('worker', 'sweeper', 'reconcile', 'admin', 'store', 'transfer'));
