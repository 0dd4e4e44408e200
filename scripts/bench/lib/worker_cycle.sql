-- The raw SQL worker cycle (issue #15): the ceiling of any PostgreSQL worker pool on this machine.
-- One transaction claims 100 queue rows (oldest first, FOR UPDATE SKIP LOCKED), inserts 100
-- result rows and 100 outbox rows selected from them, and deletes the claimed rows.
BEGIN;
WITH claimed AS (
    SELECT id FROM bench_queue ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED
), results AS (
    INSERT INTO bench_results (job_id, account_id, state)
    SELECT q.id, q.account_id, 'resolved' FROM claimed c JOIN bench_queue q USING (id)
    RETURNING job_id, account_id
), outbox AS (
    INSERT INTO bench_outbox (job_id, account_id, payload)
    SELECT job_id, account_id, 'event' FROM results
    RETURNING 1
)
DELETE FROM bench_queue WHERE id IN (SELECT id FROM claimed);
COMMIT;
