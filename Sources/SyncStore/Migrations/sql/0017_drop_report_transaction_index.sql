-- Drops `reports_by_transaction` (account_id, transaction_id), which no statement uses (issue #15).
--
-- No statement looks reports up by `transaction_id`: those that name an account (the claim,
-- reconcile, the pruner, the inspector, transfers by original transaction) are served by the
-- primary key (account_id, report_id) as well, the others by the partial indexes of pending and
-- quarantined reports or by a scan, as before. The index cost one
-- entry on every report stored by a sync request, and another on every report marked resolved
-- (that update is not HOT: `status` is in partial-index predicates), the largest statement of a
-- worker's batch. Citus propagates the drop to every shard.
DROP INDEX IF EXISTS reports_by_transaction;
