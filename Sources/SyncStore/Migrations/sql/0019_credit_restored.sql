-- A consumable's refund can be reversed (the App Store's REFUND_REVERSED, an operator's
-- `unrevoke`): its units come back as a `credit_restored` entry (docs/USAGE.md, "Ledger
-- entries"). Before, the `credit_revoked` entry stayed and the customer had paid for minutes
-- they no longer had. The constraint is replaced inside the migration's transaction; on a large
-- table the new check scans it once, under a lock that blocks writes to usage_entries meanwhile.
--
-- Written as one DO block on purpose: Citus sends the text of a DDL statement to the shards of
-- a distributed table as it is, so a file of two statements fails there ("cannot insert
-- multiple commands into a prepared statement"), and it refuses ADD CONSTRAINT beside other
-- subcommands of one ALTER TABLE. Each EXECUTE below is a statement of its own for Citus
-- (README, "Migrations").
DO $$
BEGIN
    EXECUTE 'ALTER TABLE usage_entries DROP CONSTRAINT IF EXISTS usage_entries_kind_check';
    EXECUTE 'ALTER TABLE usage_entries ADD CONSTRAINT usage_entries_kind_check CHECK (kind IN '
        || '(''allowance'', ''credit'', ''credit_revoked'', ''credit_restored'', ''reward'', ''usage'', ''adjustment''))';
END
$$;
