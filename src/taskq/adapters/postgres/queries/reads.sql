-- Reads (JobReader). JSON columns are read as text and parsed by the core, so results do
-- not depend on a jsonb codec being registered on the pool.

-- name: get_job
-- The hot table only: a pruned job lives in jobs_archive and reads as absent.
SELECT j.id, j.queue, j.actor, j.payload::text AS payload, j.status, j.priority, j.attempt,
       j.max_attempts, j.fencing_token, j.created_at, j.scheduled_at, j.started_at,
       j.finished_at, j.locked_by, j.lock_expires_at, j.cancel_phase, j.cancel_requested_at,
       j.schedule_to_close, j.identity_key, j.fairness_key, j.idempotency_key,
       j.metadata::text AS metadata, j.tags, j.result::text AS result, j.result_expires_at,
       j.last_error, j.trace_id, j.span_id
FROM {schema}.jobs j
WHERE j.id = :job_id::bigint

-- name: job_attempts
-- Oldest first; empty for a job that is unknown or archived, as the port says.
SELECT a.job_id, a.attempt, a.worker_id, a.outcome, a.error_class, a.error, a.finished_at
FROM {schema}.job_attempts a
WHERE a.job_id = :job_id::bigint
  AND EXISTS (SELECT 1 FROM {schema}.jobs j WHERE j.id = :job_id::bigint)
ORDER BY a.id

-- name: count_active
-- NULL queues counts every queue; each status term matches a partial index.
SELECT count(*) AS active
FROM {schema}.jobs j
WHERE j.status IN ('pending', 'scheduled', 'running')
  AND (:queues::text[] IS NULL OR j.queue = ANY (:queues::text[]))

-- name: queue_depths
-- Active statuses only; the core sorts (Python order, not the database collation).
SELECT j.queue, j.status, count(*) AS count
FROM {schema}.jobs j
WHERE j.status IN ('pending', 'scheduled', 'running')
GROUP BY j.queue, j.status

-- name: stranded_actors
-- Waiting jobs of actors no worker ever registered (no actor_config row).
SELECT j.actor, count(*) AS waiting
FROM {schema}.jobs j
WHERE j.status IN ('pending', 'scheduled')
  AND NOT EXISTS (SELECT 1 FROM {schema}.actor_config ac WHERE ac.actor = j.actor)
GROUP BY j.actor

-- name: ping
-- The cheapest statement that proves a pooled connection works.
SELECT 1 AS alive
