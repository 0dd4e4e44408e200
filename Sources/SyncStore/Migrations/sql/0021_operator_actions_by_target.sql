-- An endpoint's audit (`GET /v1/webhook-endpoints/{id}`, `subsync endpoints show`) reads the latest
-- operator actions about one target; without an index that read scanned the whole log. On Citus
-- the table stays on the coordinator (sql/0015).
CREATE INDEX IF NOT EXISTS operator_actions_by_target ON operator_actions (target, at) WHERE target IS NOT NULL;
