-- The claim queue keyed by its bucket, so that `subsync distribute` can distribute it with the
-- accounts (docs/CITUS.md, "Scale-out: the plan", step 1b).
--
-- Citus distributes a table only if its primary key holds the distribution column: the key
-- becomes (bucket, id). `id` keeps an index of its own for one PostgreSQL's claim, which takes
-- the oldest entry of the whole queue (`ORDER BY id`); the index on (bucket, id) of sql/0043 is
-- the new key. Applied again on a distributed cluster (the key is already two columns), it
-- changes nothing.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_index WHERE indrelid = 'account_work'::regclass AND indisprimary AND indnatts = 2) THEN
        EXECUTE 'ALTER TABLE account_work DROP CONSTRAINT account_work_pkey';
        EXECUTE 'ALTER TABLE account_work ADD CONSTRAINT account_work_pkey PRIMARY KEY (bucket, id)';
    END IF;
    EXECUTE 'DROP INDEX IF EXISTS account_work_by_bucket';
    EXECUTE 'CREATE INDEX IF NOT EXISTS account_work_by_id ON account_work (id)';
END
$$;
