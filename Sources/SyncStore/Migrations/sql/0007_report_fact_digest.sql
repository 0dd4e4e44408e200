-- One stored report per fact (issue #21): a device that resends one genuine signed transaction
-- under fresh report ids must not grow the database. A verified device report carries a digest
-- of everything it says (all fields but report id, device and observed time, which change no
-- resolution: the per-transaction join of identical facts is the same); a second report of the
-- account with the same digest is a duplicate, like a repeated report id. Reports stored before
-- this, unverified reports, store notifications and operator actions have no digest.
ALTER TABLE reports ADD COLUMN fact_digest text;
CREATE UNIQUE INDEX IF NOT EXISTS reports_by_fact ON reports (account_id, fact_digest) WHERE fact_digest IS NOT NULL;
