-- Owner writes that reschedule an attempt (JobFinisher, JobClaimer.release); terminal
-- writes are claim.sql's finish_and_claim, which claims nothing when asked for none.
--
-- Every write matches id, fencing_token and status = 'running' and first locks the owned
-- rows (in id order when there are several, as every multi-row owner write does, so
-- owner writes and heartbeats never deadlock). A lease that matches nothing is simply
-- absent from the result: the core reports it as lost and nothing was written for it.
-- Attempt rows take worker_id and started_at from the row as it was before the write.

-- name: reschedule_job
-- Retry, snooze, RetryAfter and release in one statement: due at once means pending at now, else scheduled at run_at.
-- A requested cancel (cancel_phase >= 1) ends the job cancelled instead: nothing would act on it once it waits.
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
    SET status = CASE WHEN j.cancel_phase >= 1 THEN 'cancelled'
                      WHEN o.run_at <= o.now THEN 'pending' ELSE 'scheduled' END,
        scheduled_at = CASE WHEN j.cancel_phase >= 1 THEN j.scheduled_at
                            WHEN o.run_at <= o.now THEN o.now ELSE o.run_at END,
        finished_at = CASE WHEN j.cancel_phase >= 1 THEN o.now ELSE j.finished_at END,
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
        job_id, attempt, worker_id, started_at, finished_at, outcome, error_class, error,
        traceback
    )
    SELECT o.id, o.attempt, o.locked_by, o.started_at, o.now, :outcome::text,
           :error_class::text, :error::text, :traceback::text
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

-- name: interrupt_job
-- The owner stopped the attempt for its own reasons: a retryable job waits again with its attempt refunded, any other is abandoned (it never runs twice).
-- A requested cancel (cancel_phase >= 1) ends the job cancelled instead. The attempt is recorded as interrupted, with why.
WITH req AS MATERIALIZED (
    SELECT coalesce(:now::timestamptz, now()) AS now
),
owned AS (
    SELECT j.id, j.attempt, j.locked_by,
           coalesce(j.started_at, r.now - :started_ago::interval) AS started_at, r.now
    FROM {schema}.jobs j, req r
    WHERE j.id = :job_id::bigint AND j.fencing_token = :fencing_token::bigint
      AND j.status = 'running'
    FOR UPDATE OF j
),
moved AS (
    UPDATE {schema}.jobs j
    SET status = CASE WHEN j.cancel_phase >= 1 THEN 'cancelled'
                      WHEN NOT :retryable::boolean THEN 'abandoned'
                      WHEN :run_at::timestamptz <= o.now THEN 'pending' ELSE 'scheduled' END,
        scheduled_at = CASE WHEN j.cancel_phase >= 1 OR NOT :retryable::boolean
                                THEN j.scheduled_at
                            WHEN :run_at::timestamptz <= o.now THEN o.now
                            ELSE :run_at::timestamptz END,
        finished_at = CASE WHEN j.cancel_phase >= 1 OR NOT :retryable::boolean THEN o.now
                           ELSE j.finished_at END,
        attempt = CASE WHEN :retryable::boolean THEN greatest(j.attempt - 1, 0)
                       ELSE j.attempt END,
        last_error = :error::text,
        error_class = :error_class::text,
        started_at = o.started_at,
        locked_by = NULL,
        lock_expires_at = NULL
    FROM owned o
    WHERE j.id = o.id
    RETURNING j.id
),
recorded AS (
    INSERT INTO {schema}.job_attempts (
        job_id, attempt, worker_id, started_at, finished_at, outcome, error_class, error
    )
    SELECT o.id, o.attempt, o.locked_by, o.started_at, o.now, 'interrupted',
           :error_class::text, :error::text
    FROM owned o
    RETURNING job_id
)
SELECT m.id, (SELECT count(*) FROM recorded) AS recorded FROM moved m
