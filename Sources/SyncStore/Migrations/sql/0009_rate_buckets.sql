-- Rate limits that hold across serve processes (issue #16): the token buckets of accounts,
-- devices and the daily report quota, kept where every process sees them. One row per key;
-- a request takes from its buckets in one INSERT ... ON CONFLICT DO UPDATE, which locks each
-- row, so concurrent requests from several processes cannot both spend the same token.
--
-- UNLOGGED: buckets are worth nothing after a crash (they come back full, as after a restart of
-- an in-memory limiter), and unlogged writes skip the WAL, which is most of their cost. Only the
-- key is indexed and fillfactor leaves room on each page, so a take is a HOT update (no index
-- entry written). Full buckets are deleted by the expiry sweeper once a minute (a full bucket is
-- the same as no row), a scan of the active keys.
CREATE UNLOGGED TABLE IF NOT EXISTS rate_buckets (
    key          text PRIMARY KEY,
    tokens       double precision NOT NULL,
    refreshed_at timestamptz NOT NULL,
    rate         double precision NOT NULL,  -- tokens regained per second
    burst        double precision NOT NULL,  -- the bucket's size
    cost         double precision NOT NULL,  -- what the last request asked for
    refused      boolean NOT NULL DEFAULT false  -- whether the last request was refused
) WITH (fillfactor = 50);
