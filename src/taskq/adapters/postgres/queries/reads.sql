-- Reads (JobReader). JSON columns are read as text and parsed by the core, so results do
-- not depend on a jsonb codec being registered on the pool.

-- name: get_job
-- The hot table only: a pruned job lives in jobs_archive and reads as absent. The two
-- times a caller sets are clamped into years 1..9999 (see claim.sql).
SELECT j.id, j.queue, j.actor, j.payload::text AS payload, j.status, j.priority, j.attempt,
       j.max_attempts, j.fencing_token, j.created_at,
       LEAST(GREATEST(j.scheduled_at, '0001-01-01 00:00:00+00'),
             '9999-12-31 23:59:59+00') AS scheduled_at,
       j.started_at, j.finished_at, j.locked_by, j.lock_expires_at, j.cancel_phase,
       j.cancel_requested_at,
       CASE WHEN j.schedule_to_close IS NOT NULL  -- GREATEST would turn NULL into 0001
            THEN LEAST(GREATEST(j.schedule_to_close, '0001-01-01 00:00:00+00'),
                       '9999-12-31 23:59:59+00') END AS schedule_to_close,
       j.identity_key, j.fairness_key, j.idempotency_key,
       j.metadata::text AS metadata, j.tags, j.result::text AS result,
       CASE WHEN j.result_expires_at IS NOT NULL  -- past 9999 when written before the bound
            THEN LEAST(j.result_expires_at, '9999-12-31 23:59:59+00') END AS result_expires_at,
       j.last_error, j.trace_id, j.span_id, j.attempt_timeout
FROM {schema}.jobs j
WHERE j.id = :job_id::bigint

-- name: job_attempts
-- Oldest first; empty for a job that is unknown or archived, as the port says. A succeeded attempt has no row of its own: the job row (finished_by set) is the last attempt.
SELECT h.job_id, h.attempt, h.worker_id, h.outcome, h.error_class, h.error, h.finished_at,
       h.started_at, h.traceback
FROM (
    SELECT a.job_id, a.attempt, a.worker_id, a.outcome, a.error_class, a.error,
           a.finished_at, a.started_at, a.traceback, 0 AS part, a.id AS ord
    FROM {schema}.job_attempts a
    WHERE a.job_id = :job_id::bigint
    UNION ALL
    SELECT j.id, j.attempt, j.finished_by, 'succeeded', NULL, NULL, j.finished_at,
           j.started_at, NULL, 1, 0
    FROM {schema}.jobs j
    WHERE j.id = :job_id::bigint AND j.status = 'succeeded' AND j.finished_by IS NOT NULL
) AS h
WHERE EXISTS (SELECT 1 FROM {schema}.jobs j WHERE j.id = :job_id::bigint)
ORDER BY h.part, h.ord

-- name: count_active
-- Every queue: one term per active status, so each is read through the partial index of that status.
SELECT (SELECT count(*) FROM {schema}.jobs p WHERE p.status = 'pending')
     + (SELECT count(*) FROM {schema}.jobs s WHERE s.status = 'scheduled')
     + (SELECT count(*) FROM {schema}.jobs r WHERE r.status = 'running') AS active

-- name: count_active_in
-- Some queues: one term per status, so each is read through the partial index of that status.
SELECT (SELECT count(*) FROM {schema}.jobs p
        WHERE p.status = 'pending' AND p.queue = ANY (:queues::text[]))
     + (SELECT count(*) FROM {schema}.jobs s
        WHERE s.status = 'scheduled' AND s.queue = ANY (:queues::text[]))
     + (SELECT count(*) FROM {schema}.jobs r
        WHERE r.status = 'running' AND r.queue = ANY (:queues::text[])) AS active

-- name: queue_depths
-- One term per active status (each reads its partial index, never a terminal row); pending's holds queue and scheduled_at, so it can be read index-only; the core sorts in Python order.
SELECT p.queue, 'pending' AS status, count(*) AS count, min(p.scheduled_at) AS oldest_due_at
FROM {schema}.jobs p WHERE p.status = 'pending' AND p.queue IS NOT NULL GROUP BY p.queue
UNION ALL
SELECT s.queue, 'scheduled', count(*), min(s.scheduled_at)
FROM {schema}.jobs s WHERE s.status = 'scheduled' GROUP BY s.queue
UNION ALL
SELECT r.queue, 'running', count(*), min(r.scheduled_at)
FROM {schema}.jobs r WHERE r.status = 'running' GROUP BY r.queue

-- name: stranded_actors
-- Waiting jobs no live worker (seen within :stale_after) can claim, per (actor, queue), with the reason; one arm per status, each read through its partial index.
WITH live AS MATERIALIZED (
    SELECT wk.actors, wk.queues
    FROM {schema}.workers wk
    WHERE wk.last_seen_at >= coalesce(:now::timestamptz, now()) - :stale_after::interval
),
waiting AS (
    SELECT w.actor, w.queue, count(*) AS waiting
    FROM (
        SELECT p.actor, p.queue FROM {schema}.jobs p
        WHERE p.status = 'pending'
        UNION ALL
        SELECT s.actor, s.queue FROM {schema}.jobs s
        WHERE s.status = 'scheduled'
    ) AS w
    GROUP BY w.actor, w.queue
)
SELECT g.actor, g.queue, g.waiting,
       CASE WHEN EXISTS (SELECT 1 FROM live l WHERE g.actor = ANY (l.actors))
                THEN 'queue_not_consumed'
            WHEN EXISTS (SELECT 1 FROM {schema}.actor_config ac WHERE ac.actor = g.actor)
                THEN 'no_live_worker'
            ELSE 'unregistered' END AS reason
FROM waiting g
WHERE NOT EXISTS (
    SELECT 1 FROM live l WHERE g.actor = ANY (l.actors) AND g.queue = ANY (l.queues)
)

-- name: stranded_actors_in
-- stranded_actors on some queues only (until-idle): the queue filter in each arm keeps its partial-index read.
WITH live AS MATERIALIZED (
    SELECT wk.actors, wk.queues
    FROM {schema}.workers wk
    WHERE wk.last_seen_at >= coalesce(:now::timestamptz, now()) - :stale_after::interval
),
waiting AS (
    SELECT w.actor, w.queue, count(*) AS waiting
    FROM (
        SELECT p.actor, p.queue FROM {schema}.jobs p
        WHERE p.status = 'pending' AND p.queue = ANY (:queues::text[])
        UNION ALL
        SELECT s.actor, s.queue FROM {schema}.jobs s
        WHERE s.status = 'scheduled' AND s.queue = ANY (:queues::text[])
    ) AS w
    GROUP BY w.actor, w.queue
)
SELECT g.actor, g.queue, g.waiting,
       CASE WHEN EXISTS (SELECT 1 FROM live l WHERE g.actor = ANY (l.actors))
                THEN 'queue_not_consumed'
            WHEN EXISTS (SELECT 1 FROM {schema}.actor_config ac WHERE ac.actor = g.actor)
                THEN 'no_live_worker'
            ELSE 'unregistered' END AS reason
FROM waiting g
WHERE NOT EXISTS (
    SELECT 1 FROM live l WHERE g.actor = ANY (l.actors) AND g.queue = ANY (l.queues)
)

-- name: ping
-- The cheapest statement that proves a pooled connection works.
SELECT 1 AS alive
