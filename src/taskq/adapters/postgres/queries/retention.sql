-- The leader's daily sweeps (RetentionJanitor): archive, archive expiry, result expiry.

-- name: prune_batch
-- One bounded batch per statement (short transactions, little bloat); the core repeats it until a batch comes back short.
WITH req AS MATERIALIZED (
    SELECT coalesce(:now::timestamptz, now()) AS now
),
retention AS (
    SELECT *
    FROM unnest(:statuses::text[], :retentions::interval[]) AS rt(status, keep)
),
doomed AS (
    -- One index range of jobs_finished_idx per status, oldest first; the outer LIMIT
    -- stops pulling (and locking) as soon as the batch is full.
    SELECT c.id
    FROM retention rt
    CROSS JOIN LATERAL (
        SELECT j.id
        FROM {schema}.jobs j
        -- The IN list is jobs_finished_idx's predicate, so the partial index is usable.
        WHERE j.status = rt.status
          AND j.status IN ('succeeded', 'failed', 'cancelled', 'abandoned', 'crashed')
          AND j.finished_at < (SELECT r.now FROM req r) - rt.keep
        ORDER BY j.finished_at
        LIMIT :batch_size
        FOR UPDATE OF j SKIP LOCKED
    ) AS c
    LIMIT :batch_size
),
moved AS (
    DELETE FROM {schema}.jobs j
    WHERE j.id = ANY (ARRAY(SELECT d.id FROM doomed d))
    RETURNING j.*
),
archived AS (
    INSERT INTO {schema}.jobs_archive (
        id, queue, actor, payload, status, priority, attempt, max_attempts, fencing_token,
        created_at, scheduled_at, started_at, finished_at, locked_by, lock_expires_at,
        cancel_phase, cancel_requested_at, schedule_to_close, fairness_key, identity_key,
        idempotency_key, metadata, tags, result, result_expires_at, last_error, error_class,
        trace_id, span_id, finished_by, attempt_timeout, archived_at, expire_at
    )
    SELECT m.id, m.queue, m.actor, m.payload, m.status, m.priority, m.attempt, m.max_attempts,
           m.fencing_token, m.created_at, m.scheduled_at, m.started_at, m.finished_at,
           m.locked_by, m.lock_expires_at, m.cancel_phase, m.cancel_requested_at,
           m.schedule_to_close, m.fairness_key, m.identity_key, m.idempotency_key, m.metadata,
           m.tags, m.result, m.result_expires_at, m.last_error, m.error_class, m.trace_id,
           m.span_id, m.finished_by, m.attempt_timeout, r.now,
           r.now + :archive_retention::interval
    FROM moved m, req r
    RETURNING id
)
SELECT count(*) AS archived FROM archived

-- name: expire_archive_batch
-- Bounded batches (short transactions); the attempt history of an archived job goes with it (it has no foreign key).
WITH expired AS (
    DELETE FROM {schema}.jobs_archive a
    WHERE a.id = ANY (ARRAY(
        SELECT x.id
        FROM {schema}.jobs_archive x
        WHERE x.expire_at <= coalesce(:now::timestamptz, now())
        ORDER BY x.expire_at
        LIMIT :batch_size
        FOR UPDATE SKIP LOCKED
    ))
    RETURNING a.id
),
history AS (
    DELETE FROM {schema}.job_attempts h
    WHERE h.job_id = ANY (ARRAY(SELECT e.id FROM expired e))
    RETURNING h.id
)
SELECT count(*) AS expired, (SELECT count(*) FROM history) AS history FROM expired

-- name: expire_results
-- result_expires_at stays as a record of when the result went away.
WITH expired AS (
    SELECT j.id
    FROM {schema}.jobs j
    WHERE j.result_expires_at <= coalesce(:now::timestamptz, now())
      AND j.result IS NOT NULL
      -- Finished jobs only, written so that it does not match jobs_finished_idx's
      -- predicate: without statistics the planner would AND in a read of that whole index.
      AND j.status NOT IN ('pending', 'scheduled', 'running')
    FOR UPDATE SKIP LOCKED
),
cleared AS (
    UPDATE {schema}.jobs j SET result = NULL
    WHERE j.id = ANY (ARRAY(SELECT e.id FROM expired e))
    RETURNING j.id
)
SELECT count(*) AS cleared FROM cleared
