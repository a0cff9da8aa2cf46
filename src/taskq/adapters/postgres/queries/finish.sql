-- Owner writes that end or reschedule an attempt (JobFinisher, JobClaimer.release).
--
-- Every write matches id, fencing_token and status = 'running' and first locks the owned
-- rows (in id order when there are several, as every multi-row owner write does, so
-- owner writes and heartbeats never deadlock). A lease that matches nothing is simply
-- absent from the result: the core reports it as lost and nothing was written for it.
-- Attempt rows take worker_id and started_at from the row as it was before the write.

-- name: finish_jobs
-- Terminal writes for many leases in one round trip (arrays + unnest); the stored result_ttl wins over the literal.
WITH src AS (
    SELECT *
    FROM unnest(
        :job_id::bigint[], :fencing_token::bigint[], :status::text[], :result::text[],
        :error::text[], :error_class::text[], :result_ttl::interval[], :now::timestamptz[],
        :started_ago::interval[]
    ) AS s(job_id, fencing_token, status, result, error, error_class, result_ttl, now,
           started_ago)
),
locked AS (
    -- By primary key only, then checked: a status test here would let the planner scan a
    -- partial index full of finished jobs' dead entries instead of probing the ids.
    SELECT j.id, j.actor, j.attempt, j.locked_by, j.started_at, j.status, j.fencing_token
    FROM {schema}.jobs j
    WHERE j.id = ANY (:job_id::bigint[])
    ORDER BY j.id
    FOR UPDATE OF j
),
owned AS (
    -- An unmarked start (the worker skips the mark for short jobs) began started_ago ago.
    SELECT l.id, l.actor, l.attempt, l.locked_by,
           coalesce(l.started_at, coalesce(s.now, now()) - s.started_ago) AS started_at,
           s.status, s.result, s.error, s.error_class, s.result_ttl,
           coalesce(s.now, now()) AS now
    FROM locked l
    JOIN src s ON s.job_id = l.id AND s.fencing_token = l.fencing_token
    WHERE l.status = 'running'
),
done AS (
    UPDATE {schema}.jobs j
    SET status = o.status,
        started_at = o.started_at,
        finished_at = o.now,
        result = o.result::jsonb,
        result_expires_at = o.now + coalesce(ac.result_ttl, o.result_ttl),
        last_error = CASE WHEN o.error IS NOT NULL THEN o.error
                          WHEN o.error_class IS NOT NULL THEN o.error_class
                          ELSE j.last_error END,
        error_class = CASE WHEN o.error IS NOT NULL OR o.error_class IS NOT NULL
                           THEN o.error_class ELSE j.error_class END,
        locked_by = NULL,
        lock_expires_at = NULL
    FROM owned o
    LEFT JOIN {schema}.actor_config ac ON ac.actor = o.actor
    WHERE j.id = o.id
    RETURNING j.id, j.fencing_token
),
recorded AS (
    INSERT INTO {schema}.job_attempts (
        job_id, attempt, worker_id, started_at, finished_at, outcome, error_class, error
    )
    SELECT o.id, o.attempt, o.locked_by, o.started_at, o.now, o.status, o.error_class, o.error
    FROM owned o
    ORDER BY o.id
    RETURNING job_id
)
SELECT d.id, d.fencing_token, (SELECT count(*) FROM recorded) AS recorded FROM done d

-- name: reschedule_job
-- Retry, snooze, RetryAfter and release in one statement: due at once means pending at now, else scheduled at run_at.
WITH req AS MATERIALIZED (
    SELECT coalesce(:now::timestamptz, now()) AS now
),
owned AS (
    SELECT j.id, j.attempt, j.locked_by,
           coalesce(j.started_at, r.now - :started_ago::interval) AS started_at,
           coalesce(:run_at::timestamptz, r.now + :delay::interval) AS run_at, r.now
    FROM {schema}.jobs j, req r
    WHERE j.id = :job_id::bigint AND j.fencing_token = :fencing_token::bigint
      AND j.status = 'running'
    FOR UPDATE OF j
),
moved AS (
    UPDATE {schema}.jobs j
    SET status = CASE WHEN o.run_at <= o.now THEN 'pending' ELSE 'scheduled' END,
        scheduled_at = CASE WHEN o.run_at <= o.now THEN o.now ELSE o.run_at END,
        attempt = CASE WHEN :refund_attempt::boolean THEN greatest(j.attempt - 1, 0)
                       ELSE j.attempt END,
        metadata = CASE WHEN :snooze::boolean
            THEN j.metadata || jsonb_build_object('snooze_count', 1 + CASE
                WHEN jsonb_typeof(j.metadata -> 'snooze_count') = 'number'
                     AND (j.metadata ->> 'snooze_count') ~ '^-?[0-9]+$'
                THEN (j.metadata ->> 'snooze_count')::numeric ELSE 0 END)
            ELSE j.metadata END,
        last_error = CASE WHEN :error::text IS NOT NULL THEN :error::text
                          WHEN :error_class::text IS NOT NULL THEN :error_class::text
                          ELSE j.last_error END,
        error_class = CASE WHEN :error::text IS NOT NULL OR :error_class::text IS NOT NULL
                           THEN :error_class::text ELSE j.error_class END,
        started_at = o.started_at,
        locked_by = NULL,
        lock_expires_at = NULL
    FROM owned o
    WHERE j.id = :job_id::bigint AND j.id = o.id
    RETURNING j.id
),
recorded AS (
    INSERT INTO {schema}.job_attempts (
        job_id, attempt, worker_id, started_at, finished_at, outcome, error_class, error
    )
    SELECT o.id, o.attempt, o.locked_by, o.started_at, o.now, :outcome::text,
           :error_class::text, :error::text
    FROM owned o
    RETURNING job_id
)
SELECT m.id, (SELECT count(*) FROM recorded) AS recorded FROM moved m

-- name: escalate_cancel
-- Phases only move forward, and the first request time is kept; the fence makes a stale owner's escalation a miss.
UPDATE {schema}.jobs j
SET cancel_phase = greatest(j.cancel_phase, 2),
    cancel_requested_at = coalesce(j.cancel_requested_at, coalesce(:now::timestamptz, now()))
WHERE j.id = :job_id::bigint AND j.fencing_token = :fencing_token::bigint
  AND j.status = 'running'
RETURNING j.id
