-- Account states, transaction aggregates and entitlement states are kept as `json`, the text the
-- service wrote, instead of `jsonb` (docs/PERFORMANCE.md item 29), as event payloads are since
-- sql/0016.
--
-- Nothing searches inside them in bulk: the workers write them whole (every resolved account: its
-- state, the aggregates of its changed transactions, its entitlements) and read them back whole
-- as text, by key; reconcile and operators look into one account at a time, which `json`'s `->`
-- and `->>` serve (or a cast to `jsonb` where an operator needs one). `jsonb` parsed each document
-- into its binary form on every write: `jsonb_in` was 5.3 % of the machine's CPU during a drain
-- of new accounts (perf), 4.3 us for an 800-byte state against 1.5 us for `json`'s validation,
-- and printing it back cost again on every read. Stored now exactly as the service encodes it
-- (its own key order, no spaces); `jsonb` re-ordered keys and added spaces. `json` has no
-- equality operator: the service compares the text, which its deterministic encoding makes
-- exact (a row converted here keeps jsonb's spacing until it is next written, so an unchanged
-- state rewritten once after the upgrade counts as changed once: its `updated_at` moves).
--
-- Each ALTER rewrites its table under an ACCESS EXCLUSIVE lock (reads of those rows wait): 0.7 s
-- for 100,000 800-byte states with two indexes here. README "Upgrading past sql/0031". The lock functions that
-- return states change with it, in sql/0032 (Citus refuses a function definition in the
-- transaction that altered a distributed table's shards). One DO block, each EXECUTE a statement
-- of its own, for Citus, which propagates each to every shard (README, "Migrations"); on a second
-- run each is a no-op.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE transactions ALTER COLUMN aggregate TYPE json USING aggregate::json';
    EXECUTE 'ALTER TABLE account_states ALTER COLUMN state TYPE json USING state::json';
    EXECUTE 'ALTER TABLE entitlements ALTER COLUMN state TYPE json USING state::json';
END
$$;
