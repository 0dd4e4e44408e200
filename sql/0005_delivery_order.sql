-- Ordered webhook delivery (issue #8): an account's events go to an endpoint one after another,
-- in sequence order. A delivery is sent only when no earlier delivery of the same account and
-- endpoint is still pending (waiting, retrying or leased), so the claim asks "is there an earlier
-- pending one?" for every candidate, and gathers the due deliveries that follow a claimed one.
-- Both are probes into the (small) pending set of one account and endpoint.
CREATE INDEX deliveries_pending_by_stream ON deliveries (account_id, endpoint_id, event_sequence, delivery_id)
    WHERE status = 'pending';
