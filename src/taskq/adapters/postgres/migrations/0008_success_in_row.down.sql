-- Reverts 0008_success_in_row. The succeeded attempts that only their job row recorded
-- get their job_attempts rows back first, so no history is lost.
INSERT INTO {schema}.job_attempts (
    job_id, attempt, worker_id, started_at, finished_at, outcome, error_class, error
)
SELECT j.id, j.attempt, j.finished_by, j.started_at, j.finished_at, 'succeeded', NULL, NULL
FROM (
    SELECT id, attempt, finished_by, started_at, finished_at
    FROM {schema}.jobs
    WHERE status = 'succeeded' AND finished_by IS NOT NULL
    UNION ALL
    SELECT id, attempt, finished_by, started_at, finished_at
    FROM {schema}.jobs_archive
    WHERE status = 'succeeded' AND finished_by IS NOT NULL
) AS j
ORDER BY j.finished_at, j.id;
ALTER TABLE {schema}.jobs_archive DROP COLUMN IF EXISTS finished_by;
ALTER TABLE {schema}.jobs DROP COLUMN IF EXISTS finished_by;
