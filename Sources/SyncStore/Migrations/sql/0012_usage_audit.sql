-- Operators' adjustments of the usage ledger (`subsync credits adjust`) are audited: who did it
-- and why are kept on the entry itself, which is never updated or deleted.
ALTER TABLE usage_entries ADD COLUMN IF NOT EXISTS actor text;
ALTER TABLE usage_entries ADD COLUMN IF NOT EXISTS reason text;
