-- Delivery leases apart from retry holds (issue #16). A claim used to lease deliveries by moving
-- next_attempt_at ahead; an operator's `deliveries retry` or `cancel` rewrites next_attempt_at,
-- and so could end a lease while its sender was still sending: a second sender could then claim
-- the stream and an account's later event overtake an earlier one. Now a claim sets
-- leased_until, which only the sender's `record` clears (or time, when the sender died), and a
-- stream with any leased delivery is not claimed. next_attempt_at is only the retry schedule.
ALTER TABLE deliveries ADD COLUMN IF NOT EXISTS leased_until timestamptz;
-- Leased rows are few (in flight right now) and cleared when recorded: a small partial index
-- answers "is this stream out with a sender?".
CREATE INDEX IF NOT EXISTS deliveries_leased_by_stream ON deliveries (account_id, endpoint_id, leased_until)
    WHERE leased_until IS NOT NULL;
