-- An operator's retry of a delivery no longer starts its count of attempts again: `attempts`
-- counts every attempt made (the attempts log numbers them 1, 2, 3, ... for the delivery's whole
-- life, one row each), and `attempts_before_retry` is that count when an operator last made the
-- delivery due again, so the retry schedule starts afresh from there. Before, a retry set
-- `attempts` to 0, and the next attempts took numbers already in the log, where they were
-- dropped as duplicates (`ON CONFLICT DO NOTHING`): a retried delivery's new attempts, even the
-- one that succeeded, never showed in its history. One statement, and one that can run twice
-- (README, "Migrations"); with a constant default, adding the column rewrites nothing.
ALTER TABLE deliveries ADD COLUMN IF NOT EXISTS attempts_before_retry integer NOT NULL DEFAULT 0;
