-- subsync schema, version 1.
--
-- Every per-account table is keyed by account_id first, so the schema can be distributed by
-- that column (Citus) without redesign. Webhook endpoints are global (a reference table).
-- Times are timestamptz; the service always writes UTC.

-- Devices seen per account (last seen is refreshed on every sync).
CREATE TABLE devices (
    account_id     text        NOT NULL,
    device_id      text        NOT NULL,
    platform       text,
    app_version    text,
    first_seen_at  timestamptz NOT NULL DEFAULT now(),
    last_seen_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, device_id)
);

-- Reports: the inbox and the history in one table. A report is inserted once per
-- (account_id, report_id) (the client's idempotency key) with status 'pending'; a worker
-- joins it into the transaction aggregate and marks it 'resolved'. 'quarantined' reports
-- failed repeatedly and wait for an operator.
CREATE TABLE reports (
    account_id               text        NOT NULL,
    report_id                text        NOT NULL,
    arrival                  bigint      GENERATED ALWAYS AS IDENTITY,
    device_id                text        NOT NULL,
    source                   text        NOT NULL DEFAULT 'device' CHECK (source IN ('device', 'store', 'admin')),
    received_at              timestamptz NOT NULL DEFAULT now(),
    observed_at              timestamptz NOT NULL,
    product_id               text        NOT NULL,
    original_transaction_id  text        NOT NULL,
    transaction_id           text        NOT NULL,
    purchased_at             timestamptz NOT NULL,
    expires_at               timestamptz,
    grace_period_expires_at  timestamptz,
    revoked_at               timestamptz,
    revocation_reason        text,
    is_upgraded              boolean,
    will_auto_renew          boolean,
    in_billing_retry         boolean,
    environment              text,
    signed_transaction       text,
    verified                 boolean     NOT NULL DEFAULT false,
    signed_date              timestamptz,
    admin_action             text        CHECK (admin_action IN ('revoke', 'unrevoke')),
    admin_actor              text,
    admin_reason             text,
    status                   text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'resolved', 'quarantined')),
    attempts                 integer     NOT NULL DEFAULT 0,
    last_error               text,
    resolved_at              timestamptz,
    PRIMARY KEY (account_id, report_id)
);

-- The claim query's index: only pending rows, in arrival order. Keeps the hot set small
-- however much history piles up (DESIGN §6).
CREATE INDEX reports_pending ON reports (arrival) WHERE status = 'pending';
CREATE INDEX reports_by_transaction ON reports (account_id, transaction_id);
CREATE INDEX reports_quarantined ON reports (account_id, report_id) WHERE status = 'quarantined';

-- Per-transaction aggregates: the join of all of a transaction's reports (DESIGN §3).
-- `aggregate` holds the full joined value; the columns beside it are copies for queries.
CREATE TABLE transactions (
    account_id               text        NOT NULL,
    transaction_id           text        NOT NULL,
    original_transaction_id  text        NOT NULL,
    product_id               text        NOT NULL,
    expires_at               timestamptz,
    grace_period_expires_at  timestamptz,
    revoked                  boolean     NOT NULL DEFAULT false,
    is_upgraded              boolean     NOT NULL DEFAULT false,
    report_count             bigint      NOT NULL DEFAULT 0,
    aggregate                jsonb       NOT NULL,
    updated_at               timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, transaction_id)
);
CREATE INDEX transactions_by_original ON transactions (original_transaction_id);

-- The resolved state of an account. `last_sequence` is the account's event counter (events
-- get last_sequence + 1, ... in the same transaction, so sequences have no gaps).
-- `next_transition_at` is when time alone changes the state; the expiry sweeper scans it.
CREATE TABLE account_states (
    account_id          text        NOT NULL PRIMARY KEY,
    tier                text        NOT NULL,
    state               jsonb       NOT NULL,
    last_sequence       bigint      NOT NULL DEFAULT 0,
    next_transition_at  timestamptz,
    resolved_at         timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX account_states_due ON account_states (next_transition_at) WHERE next_transition_at IS NOT NULL;
CREATE INDEX account_states_by_tier ON account_states (tier);

-- One row per entitlement of an account, the resolved entitlement state.
CREATE TABLE entitlements (
    account_id             text        NOT NULL,
    entitlement_id         text        NOT NULL,
    status                 text        NOT NULL CHECK (status IN ('active', 'grace_period', 'billing_retry', 'expired', 'revoked')),
    expires_at             timestamptz,
    product_id             text,
    source_transaction_id  text,
    will_renew             boolean,
    state                  jsonb       NOT NULL,
    updated_at             timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, entitlement_id)
);

-- Events: every change of an account's resolved state, numbered per account without gaps.
CREATE TABLE events (
    account_id   text        NOT NULL,
    sequence     bigint      NOT NULL,
    event_id     uuid        NOT NULL,
    type         text        NOT NULL,
    origin       text        NOT NULL DEFAULT 'worker' CHECK (origin IN ('worker', 'sweeper', 'reconcile', 'admin', 'store')),
    occurred_at  timestamptz NOT NULL,
    payload      jsonb       NOT NULL,
    PRIMARY KEY (account_id, sequence)
);
CREATE INDEX events_by_id ON events (event_id);
CREATE INDEX events_by_time ON events (occurred_at);

-- Webhook endpoints (global). `secret` signs; during a rotation `previous_secret` signs too
-- until `previous_secret_expires_at`.
CREATE TABLE webhook_endpoints (
    endpoint_id                 uuid        NOT NULL PRIMARY KEY,
    url                         text        NOT NULL,
    description                 text        NOT NULL DEFAULT '',
    event_types                 text[],
    secret                      text        NOT NULL,
    previous_secret             text,
    previous_secret_expires_at  timestamptz,
    enabled                     boolean     NOT NULL DEFAULT true,
    disabled_reason             text,
    failing_since               timestamptz,
    created_at                  timestamptz NOT NULL DEFAULT now(),
    updated_at                  timestamptz NOT NULL DEFAULT now()
);

-- The transactional outbox: one delivery per (event, subscribed endpoint), written in the same
-- transaction as the event.
CREATE TABLE deliveries (
    account_id       text        NOT NULL,
    delivery_id      bigint      GENERATED ALWAYS AS IDENTITY,
    endpoint_id      uuid        NOT NULL,
    event_sequence   bigint      NOT NULL,
    event_id         uuid        NOT NULL,
    status           text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'dead', 'cancelled')),
    attempts         integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    last_status_code integer,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    PRIMARY KEY (account_id, delivery_id)
);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX deliveries_by_endpoint ON deliveries (endpoint_id, status);

-- Every delivery attempt, for operators and the endpoint's health.
CREATE TABLE delivery_attempts (
    account_id        text        NOT NULL,
    delivery_id       bigint      NOT NULL,
    attempt           integer     NOT NULL,
    attempted_at      timestamptz NOT NULL DEFAULT now(),
    status_code       integer,
    latency_ms        integer,
    error             text,
    response_excerpt  text,
    PRIMARY KEY (account_id, delivery_id, attempt)
);
