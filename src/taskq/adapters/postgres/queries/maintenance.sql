-- The leader's frequent sweeps (LeaseJanitor). Each is one short statement; rows some
-- other transaction holds (an owner finishing, a claimer) are skipped and left to the
-- next sweep rather than waited for. Timestamps in messages are rendered as Python's
-- datetime.isoformat() renders UTC, so both adapters write the same text.

-- name: promote_scheduled
-- scheduled_at is kept: a promoted job competes by the time it became due.
WITH promoted AS (
    UPDATE {schema}.jobs j SET status = 'pending'
    WHERE j.id = ANY (ARRAY(
        SELECT d.id
        FROM {schema}.jobs d
        WHERE d.status = 'scheduled' AND d.scheduled_at <= coalesce(:now::timestamptz, now())
        FOR UPDATE SKIP LOCKED
    ))
    RETURNING j.id
)
SELECT count(*) AS promoted FROM promoted

-- name: reclaim_expired
-- Their worker died. A job with no start on record waits again with its attempt refunded and no attempt row, counted in metadata.reclaimed_unstarted (its next worker gates it).
-- A started job's attempt counts: crashed once its attempts are spent, else pending. A job whose cancel was requested ends cancelled: re-pended, it would run again.
-- The EPQ recheck of lock_expires_at < now drops a lease a heartbeat extended meanwhile; the next claim issues a new fencing token.
WITH req AS MATERIALIZED (
    SELECT coalesce(:now::timestamptz, now()) AS now
),
expired AS (
    SELECT j.id, j.attempt, j.locked_by, j.started_at,
           j.started_at IS NULL AS unstarted,
           (j.started_at IS NOT NULL AND j.max_attempts IS NOT NULL
            AND j.attempt >= j.max_attempts) AS spent,
           'lease held by ' || coalesce(j.locked_by, 'None') || ' expired at '
               || to_char(j.lock_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
               || CASE WHEN date_part('microseconds', j.lock_expires_at)::bigint % 1000000 <> 0
                       THEN to_char(j.lock_expires_at AT TIME ZONE 'UTC', '.US') ELSE '' END
               || '+00:00' AS error
    FROM {schema}.jobs j, req r
    WHERE j.status = 'running' AND j.lock_expires_at < r.now
    ORDER BY j.id
    FOR UPDATE OF j SKIP LOCKED
),
moved AS (
    UPDATE {schema}.jobs j
    SET status = CASE WHEN j.cancel_phase >= 1 THEN 'cancelled'
                      WHEN e.spent THEN 'crashed' ELSE 'pending' END,
        finished_at = CASE WHEN e.spent OR j.cancel_phase >= 1 THEN r.now
                           ELSE j.finished_at END,
        attempt = CASE WHEN e.unstarted THEN greatest(j.attempt - 1, 0) ELSE j.attempt END,
        metadata = CASE WHEN e.unstarted
            THEN j.metadata || jsonb_build_object('reclaimed_unstarted', 1 + CASE
                WHEN jsonb_typeof(j.metadata -> 'reclaimed_unstarted') = 'number'
                     AND (j.metadata ->> 'reclaimed_unstarted') ~ '^-?[0-9]+$'
                THEN (j.metadata ->> 'reclaimed_unstarted')::numeric ELSE 0 END)
            ELSE j.metadata END,
        last_error = CASE WHEN e.unstarted THEN j.last_error
                          ELSE 'LeaseExpired: ' || e.error END,
        error_class = CASE WHEN e.unstarted THEN j.error_class ELSE 'LeaseExpired' END,
        locked_by = NULL,
        lock_expires_at = NULL
    FROM expired e, req r
    WHERE j.id = e.id
    RETURNING j.id, j.status
),
recorded AS (
    INSERT INTO {schema}.job_attempts (
        job_id, attempt, worker_id, started_at, finished_at, outcome, error_class, error
    )
    SELECT e.id, e.attempt, e.locked_by, e.started_at, r.now,
           CASE WHEN e.spent THEN 'crashed' ELSE 'lease_expired' END, 'LeaseExpired', e.error
    FROM expired e, req r
    WHERE NOT e.unstarted
    ORDER BY e.id
    RETURNING job_id
)
SELECT m.id, m.status, e.unstarted, (SELECT count(*) FROM recorded) AS recorded
FROM moved m
JOIN expired e ON e.id = m.id
ORDER BY m.id

-- name: time_to_lease_expiry
-- The leader sleeps this long, then reclaims: a delay on the database's clock, so the
-- leader's clock never meets the leases'. No index holds lock_expires_at (a heartbeat's
-- extension stays a HOT update); running rows are few, as for reclaim_expired.
SELECT min(j.lock_expires_at) - coalesce(:now::timestamptz, now()) AS wait
FROM {schema}.jobs j
WHERE j.status = 'running'

-- name: fail_past_deadline
-- Only waiting jobs: a running job's deadline is its owner's to enforce.
WITH req AS MATERIALIZED (
    SELECT coalesce(:now::timestamptz, now()) AS now
),
late AS (
    SELECT j.id
    FROM {schema}.jobs j, req r
    WHERE j.status IN ('pending', 'scheduled')
      AND j.schedule_to_close IS NOT NULL
      AND j.schedule_to_close <= r.now
    FOR UPDATE OF j SKIP LOCKED
),
failed AS (
    UPDATE {schema}.jobs j
    SET status = 'failed',
        finished_at = r.now,
        error_class = 'DeadlineExceeded',
        last_error = 'DeadlineExceeded: schedule_to_close '
            || to_char(j.schedule_to_close AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
            || CASE WHEN date_part('microseconds', j.schedule_to_close)::bigint % 1000000 <> 0
                    THEN to_char(j.schedule_to_close AT TIME ZONE 'UTC', '.US') ELSE '' END
            || '+00:00 passed before the job ran',
        locked_by = NULL,
        lock_expires_at = NULL
    FROM req r
    WHERE j.id = ANY (ARRAY(SELECT l.id FROM late l))
    RETURNING j.id
)
SELECT f.id FROM failed f ORDER BY f.id

-- name: cleanup_stale_workers
-- Their running jobs are not touched here: the reclaim sweep handles expired leases.
DELETE FROM {schema}.workers w
WHERE w.last_seen_at < coalesce(:now::timestamptz, now()) - :stale_after::interval
RETURNING w.worker_id
