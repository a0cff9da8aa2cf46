-- Operator reads and writes (JobAdmin): the job list, the retry of a finished job, the worker overview.

-- name: list_jobs
-- Newest first over the hot table (an archived job reads as absent, as get_job); NULL filters match any. The times a caller sets are clamped into years 1..9999, as in get_job.
SELECT j.id, j.queue, j.actor, j.payload::text AS payload, j.status, j.priority, j.attempt,
       j.max_attempts, j.fencing_token, j.created_at,
       LEAST(GREATEST(j.scheduled_at, '0001-01-01 00:00:00+00'),
             '9999-12-31 23:59:59+00') AS scheduled_at,
       j.started_at, j.finished_at, j.locked_by, j.lock_expires_at, j.cancel_phase,
       j.cancel_requested_at,
       CASE WHEN j.schedule_to_close IS NOT NULL
            THEN LEAST(GREATEST(j.schedule_to_close, '0001-01-01 00:00:00+00'),
                       '9999-12-31 23:59:59+00') END AS schedule_to_close,
       j.identity_key, j.fairness_key, j.idempotency_key,
       j.metadata::text AS metadata, j.tags, j.result::text AS result,
       CASE WHEN j.result_expires_at IS NOT NULL  -- past 9999 when written before the bound
            THEN LEAST(j.result_expires_at, '9999-12-31 23:59:59+00') END AS result_expires_at,
       j.last_error, j.trace_id, j.span_id, j.attempt_timeout
FROM {schema}.jobs j
WHERE (:status::text IS NULL OR j.status = :status::text)
  AND (:actor::text IS NULL OR j.actor = :actor::text)
  AND (:queue::text IS NULL OR j.queue = :queue::text)
ORDER BY j.id DESC
LIMIT :limit::integer

-- name: retry_job
-- One statement, race-free: the job's row is locked first, so of concurrent retries the later ones read it pending and change nothing; a running row is never matched. Another active job holding its identity key refuses it (the unique index would too).
WITH req AS MATERIALIZED (
    SELECT coalesce(:now::timestamptz, now()) AS now
),
target AS MATERIALIZED (
    SELECT j.id, j.status, j.actor, j.identity_key
    FROM {schema}.jobs j
    WHERE j.id = :job_id::bigint
    FOR NO KEY UPDATE
),
holder AS MATERIALIZED (
    SELECT h.id
    FROM {schema}.jobs h, target t
    WHERE t.identity_key IS NOT NULL AND h.actor = t.actor AND h.identity_key = t.identity_key
      AND h.status IN ('pending', 'scheduled', 'running') AND h.id <> t.id
    LIMIT 1
),
retried AS (
    UPDATE {schema}.jobs j
    SET status = 'pending', scheduled_at = r.now, started_at = NULL, finished_at = NULL,
        finished_by = NULL, locked_by = NULL, lock_expires_at = NULL, cancel_phase = 0,
        cancel_requested_at = NULL, result = NULL, result_expires_at = NULL
    FROM req r, target t
    WHERE j.id = t.id AND t.status IN ('failed', 'cancelled', 'crashed', 'abandoned')
      AND NOT EXISTS (SELECT 1 FROM holder)
    RETURNING j.id
)
SELECT (SELECT t.status FROM target t) AS found_status,
       (SELECT d.id FROM retried d) AS retried_id,
       (SELECT h.id FROM holder h) AS holder_id,
       (SELECT t.identity_key FROM target t) AS identity_key

-- name: worker_status
-- Small tables; the core sorts. Held jobs are counted through the running-owner index.
SELECT w.worker_id, w.hostname, w.pid, w.queues, w.started_at, w.last_seen_at, w.worker_label,
       w.workgroup_instance,
       EXISTS (SELECT 1 FROM {schema}.maintenance_leader ml
               WHERE ml.worker_id = w.worker_id) AS is_leader,
       (SELECT count(*) FROM {schema}.jobs j
        WHERE j.status = 'running' AND j.locked_by = w.worker_id) AS jobs_held
FROM {schema}.workers w
