-- Minute packs that move to another account (binding policy `transfer`) no longer mint units
-- (docs/USAGE.md, "The balance", rule 5): a pack's `credit_transferred:` debit
-- is told apart from refunds and operator debits, so that what of it was already spent in the
-- account it leaves is billed there as overage instead of leaving a debt nobody pays.
-- usage_totals keeps those units in a column of their own. Open periods' rows are dropped: they
-- are sums of the entries, stored again from the entries by the next balance taken under the
-- account's lock (docs/USAGE.md, "Cost"). Final rows stay as they were billed, with their
-- transfers among the debits. Stop every older `serve` before migrating: one would store the
-- rows again with the moved units among the debits (docs/OPERATIONS.md, "Upgrade notes").
--
-- One DO block, each statement EXECUTEd on its own (Citus, sql/0019).
DO $$
BEGIN
    EXECUTE 'ALTER TABLE usage_totals ADD COLUMN IF NOT EXISTS transfers bigint NOT NULL DEFAULT 0';
    EXECUTE 'DELETE FROM usage_totals WHERE NOT final';
END
$$;
