-- A claim's lease is written in place (a HOT update) instead of as a new version of the
-- delivery with an entry in every index (docs/PERFORMANCE.md item 23).
--
-- A claim sets `leased_until` on every delivery it takes, and the sender's `record` clears it.
-- With `deliveries_leased_by_stream` (sql/0008) indexing that column, each lease was a new row
-- version plus four index entries (the key, the due and the stream indexes, the lease index):
-- about half of a claim's time (EXPLAIN ANALYZE, 500 heads: 5 of 11 ms). Without an index on
-- the column, and with room on the page (fillfactor 70, for the pages written from now on), the
-- lease is a heap-only update: no index is touched.
--
-- What the index answered, "is any delivery of this stream out with a sender?", is asked of the
-- stream's pending deliveries instead (deliveries_pending_by_stream, sql/0005: a stream's
-- pending set). A leased delivery stays pending until its sender records it (which clears the
-- lease with the status): an operator's `cancel` refuses a delivery that is out
-- (DeliveryStore.cancel), and deleting its endpoint ends its stream.
--
-- One DO block, each EXECUTE a statement of its own for Citus (README, "Migrations"). The
-- delivery claim Citus runs (sql/0014) asks the same question from sql/0027: in a file of its
-- own, because Citus refuses a function definition in a transaction that changed a distributed
-- table's shards in parallel.
DO $$
BEGIN
    EXECUTE 'DROP INDEX IF EXISTS deliveries_leased_by_stream';
    EXECUTE 'ALTER TABLE deliveries SET (fillfactor = 70)';
END
$$;
