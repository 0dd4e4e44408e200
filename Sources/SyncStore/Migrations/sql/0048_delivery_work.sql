-- Due deliveries by claim queue bucket (docs/CITUS.md, "How the pipeline runs on Citus"; the
-- plan's step 4 for deliveries). On Citus a delivery claim used to find its due deliveries with a
-- read of every shard of `deliveries`, whose rows are placed by account. A row here says that an
-- account may have deliveries due from `due_at` on, in the bucket of its shard; `subsync
-- distribute` distributes the table by bucket with the accounts, so a delivery loop takes one
-- bucket's due accounts on the node that holds them and claims their deliveries there, every
-- statement on one shard.
--
-- A transaction on an account's node that writes deliveries writes its row in the same
-- transaction; a claim and a record set it to the account's next due time, or delete it when
-- nothing is pending; the loops' hold (every 10 s) writes the rows of accounts with due
-- deliveries and none, which covers every other writer (an operator's retry or replay, an
-- endpoint enabled again, a release from a secret hold). One PostgreSQL keeps the table empty:
-- its claim reads `deliveries` through its due index.
CREATE TABLE IF NOT EXISTS delivery_work (
    bucket text NOT NULL,
    account_id text NOT NULL,
    due_at timestamptz NOT NULL,
    PRIMARY KEY (bucket, account_id)
);
CREATE INDEX IF NOT EXISTS delivery_work_due ON delivery_work (bucket, due_at);
