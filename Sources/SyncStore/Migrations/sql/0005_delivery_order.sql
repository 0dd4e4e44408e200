-- Ordered webhook delivery (issue #8): an account's events go to an endpoint one after another,
-- in sequence order. A delivery is sent only when it is the first pending delivery of its stream
-- (account and endpoint), and a claim gathers the pending deliveries behind each claimed one:
-- both are ordered probes into the (small) pending set of one stream.
--
-- deliveries_by_endpoint (endpoint_id, status) goes: with stale statistics (a burst into a
-- young table) the planner served those probes from it, reading every pending delivery of the
-- endpoint per probe (the webhook benchmark fell from 7,000 to 400 deliveries/s). The stream
-- index leads with endpoint_id, so it also serves what that index did: an endpoint's pending
-- deliveries (cancelled when the endpoint is deleted). Operator queries by endpoint over all
-- statuses (`deliveries list --endpoint`, `retry --dead --endpoint`, `stats`) read the table.
-- The index is built inside the migration's transaction, which blocks writes to deliveries while
-- it builds: on a large table, create it beforehand with CREATE INDEX CONCURRENTLY (same name).
DROP INDEX IF EXISTS deliveries_by_endpoint;
CREATE INDEX IF NOT EXISTS deliveries_pending_by_stream ON deliveries (endpoint_id, account_id, event_sequence, delivery_id)
    WHERE status = 'pending';
