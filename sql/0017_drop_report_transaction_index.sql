-- Drops `reports_by_transaction` (account_id, transaction_id), which no statement uses (issue #15).
--
-- Every query of `reports` names the account first (the claim, reconcile, the pruner, the
-- inspector, transfers by original transaction), and the primary key (account_id, report_id)
-- serves that prefix as well; nothing looks a report up by `transaction_id`. The index cost one
-- entry on every report stored by a sync request, and another on every report marked resolved
-- (that update is not HOT: `status` is in partial-index predicates), the largest statement of a
-- worker's batch. Citus propagates the drop to every shard.
DROP INDEX IF EXISTS reports_by_transaction;
