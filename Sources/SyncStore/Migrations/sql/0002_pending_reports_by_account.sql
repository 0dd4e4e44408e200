-- Pending reports of one account, for the API's pending count and wait_ms, without reading
-- the account's whole report history.
CREATE INDEX reports_pending_by_account ON reports (account_id) WHERE status = 'pending';
